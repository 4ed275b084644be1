"""Report sections: the engine's own account per level, and what the bench cost.

Beside our client-side distributions of each level, the engine's (tui/bench/level_truth.py:
histogram quantiles interpolated in the engine's buckets, so estimates), then every
request the bench made that was not measured, then the bench's own CPU.
"""

from __future__ import annotations

from typing import Any

from tui.bench.report.shape import BenchReport, LevelSummary

DASH = "–"


def _n(x: Any, digits: int = 1) -> str:
    return DASH if x is None else f"{x:,.{digits}f}"


def _pair(engine: Any, ours: Any, digits: int = 1) -> str:
    return f"{_n(engine, digits)} · {_n(ours, digits)}"


def _vllm_row(lv: LevelSummary, t: dict[str, Any]) -> list[str]:
    h, p = t.get("histograms", {}), lv["percentiles"]
    ttft, tpot, e2e = h.get("ttft_ms", {}), h.get("tpot_ms", {}), h.get("e2e_ms", {})
    itl = h.get("itl_ms", {})
    return [
        lv["label"],
        f"{_n(t.get('requests'), 0)} / {lv['ok']}",
        _pair(ttft.get("p50"), p["ttft_ms"].get("p50")),
        _pair(ttft.get("p90"), p["ttft_ms"].get("p90")),
        _pair(itl.get("p50"), p["itl_ms"].get("p50"), 2),
        _pair(tpot.get("p50"), p["tpot_ms"].get("p50"), 2),
        _pair(e2e.get("p50"), p["e2e_ms"].get("p50"), 0),
        _n(h.get("queue_ms", {}).get("p50")),
    ]


def _llama_row(lv: LevelSummary, t: dict[str, Any]) -> list[str]:
    dec = (lv["medians"].get("decode_tps") or {}).get("estimate")
    return [
        lv["label"],
        _n(t.get("generation_tokens"), 0),
        _n(t.get("prefill_tps_per_slot")),
        _pair(t.get("decode_tps_per_slot"), dec),
        _n(t.get("tokens_per_decode_call"), 2),
    ]


def truth_markdown(report: BenchReport, table: Any) -> list[str]:
    """The sections, in report.md's style (``table`` is report_md's table helper)."""
    lines: list[str] = []
    for e in report["summary"]["engines"]:
        levels = [(lv, t) for lv in e["levels"] if (t := lv.get("engine_truth"))]
        if not levels:
            continue
        source = levels[0][1]["source"]
        lines += [f"## The engine's own account: {e['name']}", "", f"From {source}.", ""]
        if e["kind"] == "vllm":
            head = ["level", "requests (engine / ours ok)", "TTFT p50 ms (engine · ours)"]
            head += ["TTFT p90", "ITL p50", "TPOT p50", "e2e p50", "queue p50 ms (engine)"]
            rows = [_vllm_row(lv, t) for lv, t in levels]
            lines += table(head, rows)
            lines += ["Engine quantiles are interpolated in its histogram buckets.", ""]
        else:
            head = ["level", "generated tokens", "prefill tok/s per slot"]
            head += ["decode tok/s per slot (engine · our median)", "tokens per decode call"]
            lines += table(head, [_llama_row(lv, t) for lv, t in levels])
    lines += extra_requests_markdown(report, table)
    own = report.get("own_cpu")
    if own:
        lines += [
            "## infertop's own cost",
            "",
            f"The bench used {own['percent_of_a_core']:.1f}% of a core "
            f"({own['cpu_s']:.2f} s in this process"
            + (
                f" + {own['helpers_cpu_s']:.2f} s in worker processes"
                if own["helpers_cpu_s"]
                else ""
            )
            + f" over {own['wall_s']:.1f} s; engines in their own processes not included).",
            "",
        ]
    return lines


def extra_requests_markdown(report: BenchReport, table: Any) -> list[str]:
    """Every request the bench made that was not a measured request."""
    rows = []
    for e in report["summary"]["engines"]:
        setup = e.get("setup_requests") or {}
        if setup:
            rows.append([e["name"], "before the levels", _calls(setup)])
        for lv in e["levels"]:
            extra = lv.get("extra_requests") or {}
            paused = lv.get("paused_s") or 0.0
            note = (
                f" (wall time leaves out {paused * 1000:.0f} ms between requests)" if paused else ""
            )
            rows.append([e["name"], lv["label"], (_calls(extra) or "none") + note])
    if not rows:
        return []
    lines = ["## Requests the bench made that were not measured", ""]
    made: list[str] = table(["engine", "when", "requests"], rows)
    return lines + made


def _helpers(own: dict[str, Any]) -> str:
    cpu = own.get("helpers_cpu_s") or 0.0
    return f" + {cpu:.2f} s in worker processes" if cpu else ""


def _calls(calls: dict[str, int]) -> str:
    return ", ".join(f"{k} ×{n}" for k, n in calls.items())
