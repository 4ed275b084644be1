"""report.md's energy section, and the J/token cells other tables borrow.

Every figure names how it was measured: a counter ("NVML total-energy counter", "RAPL
energy_uj") or power integrated at the sample rate, marked "est." (definitions:
tui/core/energy.py; the bench's windows: tui/bench/energy.py).
"""

from __future__ import annotations

from typing import Any

from tui.bench.report.format import DASH, num, table
from tui.bench.report.shape import BenchReport, LevelSummary


def jpt_cell(level: LevelSummary | None) -> str:
    """ "0.421" or "0.421 (est.)" — a level's J/token for a table cell."""
    e = (level.get("energy") if level else None) or {}
    jpt = e.get("j_per_token")
    if jpt is None:
        return DASH
    return f"{jpt:.3g}" + (" (est.)" if e.get("estimated") else "")


def _how(d: dict[str, Any]) -> str:
    if d.get("joules") is None:
        return f"unknown: {d.get('reason') or '?'}"
    if d.get("method") == "counter":
        return str(d.get("source") or "energy counter")
    hz = d.get("sample_hz")
    rate = f" at {hz:.1f} Hz" if hz else ""
    return f"integrated from {d.get('source') or 'power'}{rate} (est.)"


def energy_markdown(report: BenchReport) -> list[str]:
    """The "Energy per token" section; nothing when energy was not measured."""
    src = report.get("energy_source")
    engines = report["summary"]["engines"]
    levels = [(e, lv, en) for e in engines for lv in e["levels"] if (en := lv.get("energy"))]
    if not src:
        return []
    lines = ["## Energy per token", ""]
    where = f"{src.get('source')}, read every {src.get('interval_s')} s"
    if not levels:
        return lines + [f"No energy or power reading from {where}.", ""]
    rows = []
    for e, lv, en in levels:
        domains = "; ".join(
            f"{d['domain']}: {num(d.get('joules'), 1)} J, {_how(d)}" for d in en["domains"]
        )
        rows.append(
            [
                e["name"],
                lv["label"],
                jpt_cell(lv),
                num(en.get("tokens_per_j"), 2),
                num(en.get("j_per_token_median"), 3) if "requests" in en else DASH,
                num(en.get("joules"), 1),
                num(en.get("window_s"), 1),
                domains.replace("|", "\\|"),
            ]
        )
    lines += table(
        [
            "engine",
            "level",
            "J/token",
            "tokens/J",
            "J/token per request (median)",
            "energy J",
            "window s",
            "domains (source)",
        ],
        rows,
    )
    lines += [
        f"- Hardware: {where}. J/token = energy over the level's window (first request "
        "sent → last stream ended) ÷ output tokens of its ok requests; per request only "
        "where requests ran alone (c=1, cold): energy over its request-sent → stream-end "
        "window ÷ its output tokens.",
        "- Energy is read off the device's energy counter where it has one (interpolated "
        "between readings); else integrated from sampled power and marked (est.). It is "
        "the whole device's energy in the window, idle power included.",
        "",
    ]
    return lines
