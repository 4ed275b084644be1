"""The context-depth part of a report: summary, Markdown table and plots.

Per engine and depth (tui.bench.run.depth): medians with 95 % percentile-bootstrap intervals
over the level's ok requests of decode tok/s, TTFT, prompt tok/s and per-token ITL (each
request's median), and the ratio of each depth's median decode tok/s and TTFT to those at
depth 0 (bootstrap interval of the ratio, resampling both levels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tui.bench.report.format import DASH, ci, num, table
from tui.bench.report.shape import BenchReport
from tui.bench.report.svg import COLORS, Plot

if TYPE_CHECKING:
    pass


def _ratio(r: dict[str, Any] | None) -> str:
    if not r:
        return DASH
    return f"{r['ratio']:.2f}× [{r['low']:.2f}, {r['high']:.2f}]"


def depth_markdown(report: BenchReport) -> list[str]:
    """The "Context depth" section (no lines when no engine measured a depth)."""
    engines = [e for e in report["summary"]["engines"] if e.get("depth")]
    if not engines:
        return []
    lines = [
        "## Context depth (concurrency 1; median [95% CI])",
        "",
        "Depth: tokens of prior context before the question (one earlier user turn and "
        "the assistant's reply), counted by the engine: its prompt tokens for the whole "
        "request minus those for the question alone.",
        "",
    ]
    rows = []
    for e in engines:
        for d in e["depth"]:
            m = d["medians"]
            rows.append(
                [
                    e["name"],
                    str(d["depth"])
                    + ("" if d["level"] == f"depth={d['depth']}" else f" ({d['level']} level)")
                    + ("" if d["complete"] else " (stopped)"),
                    num(d["counted_depth"]),
                    num(d["prompt_tokens_median"], 0),
                    ci(m.get("decode_tps")),
                    ci(m.get("ttft_ms")),
                    ci(m.get("prefill_tps")),
                    _ratio(d["vs_depth0"].get("decode_tps")),
                    _ratio(d["vs_depth0"].get("ttft_ms")),
                    f"{d['ok']} / {d['failed']}",
                ]
            )
    lines += table(
        [
            "engine",
            "depth",
            "counted depth",
            "prompt tokens",
            "decode tok/s",
            "TTFT ms",
            "prompt tok/s",
            "decode vs depth 0",
            "TTFT vs depth 0",
            "ok / failed",
        ],
        rows,
    )
    return lines


def _depth_plot(report: BenchReport, metric: str, title: str, ylabel: str) -> str:
    series: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    for e in report["summary"]["engines"]:
        pts = []
        for d in e.get("depth") or []:
            iv = d["medians"].get(metric)
            x = d["counted_depth"] if d["counted_depth"] is not None else d["depth"]
            if iv:
                pts.append((float(x), iv))
        if pts:
            series[e["name"]] = pts
    xs = [x for pts in series.values() for x, _ in pts] or [0.0, 1.0]
    ys = [
        v
        for pts in series.values()
        for _, iv in pts
        for v in (iv["estimate"], iv.get("high"))
        if v is not None
    ] or [1.0]
    p = Plot(
        title,
        "prior context (tokens, counted by the engine)",
        ylabel,
        (0.0, max(xs)),
        (0.0, max(ys)),
    )
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        p.line([(x, iv["estimate"]) for x, iv in pts], color, name, markers=True)
        for x, iv in pts:  # the 95 % interval of the median, as a whisker
            if iv.get("low") is not None:
                p.parts.append(
                    f'<line x1="{p.px(x):.1f}" y1="{p.py(iv["low"]):.1f}" x2="{p.px(x):.1f}" '
                    f'y2="{p.py(iv["high"]):.1f}" stroke="{color}" stroke-width="1.5"/>'
                )
    return p.render()


def depth_plots(report: BenchReport) -> dict[str, str]:
    """depth_tps.svg and depth_ttft.svg (median and 95 % interval against depth)."""
    if not any(e.get("depth") for e in report["summary"]["engines"]):
        return {}
    return {
        "depth_tps.svg": _depth_plot(
            report, "decode_tps", "Decode tok/s vs context depth", "decode tok/s (median)"
        ),
        "depth_ttft.svg": _depth_plot(
            report, "ttft_ms", "TTFT vs context depth", "TTFT ms (median)"
        ),
    }
