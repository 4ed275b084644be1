"""``infertop bench``'s summary on the terminal: per engine its requests, medians, TTFO,
energy, depth and batching lines, warnings, and what the bench itself cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui.bench.report.shape import LevelSummary, Summary
from tui.core.safe_text import terminal_label


def _ttfo_text(level: LevelSummary | None) -> str:
    """ ", TTFO 812.0 ms" where the level's median TTFO differs from its TTFT (a model that
    reasons answers after its thinking); "" where they are the same."""
    med = (level.get("medians") if level else None) or {}
    ttft, ttfo = med.get("ttft_ms"), med.get("ttfo_ms")
    if ttfo is None and level and level.get("reasoning"):
        return ", TTFO — (no answer after the thinking)"
    if not ttfo or ttfo == ttft:
        return ""
    return f", TTFO {ttfo['estimate']:.1f} ms"


def _energy_text(level: LevelSummary | None) -> str:
    """ ", 0.42 J/token (counter)" for the terminal's summary line; "" when unknown."""
    e = (level.get("energy") if level else None) or {}
    jpt = e.get("j_per_token")
    if jpt is None:
        return ""
    return f", {jpt:.3g} J/token ({'estimate' if e.get('estimated') else 'counter'})"


def print_own_cost(summary: Summary, own: dict[str, Any] | None) -> None:
    """What the bench itself cost: its CPU, and the requests it made that were not
    measured (per engine: before the levels, then per level; report.md has the detail)."""
    for e in summary["engines"]:
        made = sum((e.get("setup_requests") or {}).values())
        per_level = [f"{lv['label']} {sum(lv['extra_requests'].values())}" for lv in e["levels"]]
        if made or per_level:
            print(
                f"{e['name']}: unmeasured requests: {made} before the levels"
                + (f"; per level: {', '.join(per_level)}" if per_level else "")
            )
    if own:
        print(
            f"infertop's own CPU: {own['percent_of_a_core']:.1f}% of a core over "
            f"{own['wall_s']:.1f} s (this process"
            + (" and its worker processes" if own.get("helpers_cpu_s") else "")
            + "; engines in their own processes not included)"
        )


def print_summary(summary: Summary, partial: bool, reason: str | None, path: Path) -> None:
    def fmt(iv: Any, unit: str) -> str:
        return "—" if not iv else f"{iv['estimate']:.1f} {unit}"

    if partial:
        print(f"PARTIAL REPORT ({reason})")
    for e in summary["engines"]:
        if e["error"]:
            print(f"{e['name']}: FAILED: {terminal_label(e['error'], 2000)}")
            continue
        head = next((lv for lv in e["levels"] if lv["label"] == e["headline"]), None)
        med = head["medians"] if head else {}
        print(
            f"{e['name']}: {e['ok']} ok, {e['failed']} failed"
            + (f", {e['cancelled']} cancelled" if e["cancelled"] else "")
            + f"; decode {fmt(med.get('decode_tps'), 'tok/s')}"
            + f", TTFT {fmt(med.get('ttft_ms'), 'ms')}"
            + _ttfo_text(head)
            + _energy_text(head)
        )
        for d in e.get("depth") or []:
            med = d["medians"]
            print(
                f"  depth {d['depth']} (counted {d['counted_depth']}): decode "
                f"{fmt(med.get('decode_tps'), 'tok/s')}, TTFT {fmt(med.get('ttft_ms'), 'ms')}"
            )
        alpha = (e.get("batching") or {}).get("alpha")
        if alpha:
            ns = ",".join(str(r["concurrency"]) for r in e["batching"]["levels"])
            print(
                f"  batching model α = {alpha['estimate']:.3f} "
                f"[{alpha['low']:.3f}, {alpha['high']:.3f}] (N = {ns})"
            )
        if e["all_failed"] and e["failures"]:
            first = terminal_label(e["failures"][0]["message"], 2000)
            print(f"  every request failed; first error: {first}")
        for w in e["warnings"]:
            print(f"  warning: {terminal_label(w, 2000)}")
    print(f"report: {path.parent}")
