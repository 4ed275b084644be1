"""The Pareto view of a bench: per-user decode speed against total throughput, one point
per load level, per engine (table in report.md, ``pareto.svg``).

- x: total output tok/s of the level (its output tokens ÷ its wall time);
- y: per-user decode tok/s, the level's median over ok requests of (output tokens − 1) /
  (last token − first token): how fast one user sees text once it starts.
- A level is on its engine's **frontier** when no other level of the same engine has
  both a higher total and a higher per-user speed.
- The **SLO line**, with ``--slo tpot_ms=T``: per-user tok/s = 1000 / T (a decode at
  that speed has a TPOT of T; TPOT also holds the first-token gap, so this is the line
  a median request must be above, not a guarantee for every request).
"""

from __future__ import annotations

from typing import Any

from tui.bench.report.format import DASH, num, table
from tui.bench.report.shape import BenchReport
from tui.bench.report.svg import COLORS, Plot


def pareto_points(report: BenchReport) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in report["summary"]["engines"]:
        pts = []
        for lv in e["levels"]:
            per_user = (lv["medians"].get("decode_tps") or {}).get("estimate")
            if lv["total_tps"] is None or per_user is None:
                continue
            pts.append({"label": lv["label"], "total_tps": lv["total_tps"], "per_user": per_user})
        for p in pts:
            p["frontier"] = not any(
                q["total_tps"] > p["total_tps"] and q["per_user"] > p["per_user"] for q in pts
            )
        if pts:
            out[e["name"]] = pts
    return out


def slo_line(report: BenchReport) -> float | None:
    tpot = (report["plan"].get("slo") or {}).get("tpot_ms")
    return 1000.0 / tpot if tpot else None


def pareto_markdown(report: BenchReport) -> list[str]:
    series = pareto_points(report)
    if not series or all(len(p) < 2 for p in series.values()):
        return []
    line = slo_line(report)
    rows = [
        [
            name,
            p["label"],
            num(p["total_tps"]),
            num(p["per_user"]),
            "yes" if p["frontier"] else "no",
            DASH if line is None else ("above" if p["per_user"] >= line else "below"),
        ]
        for name, pts in series.items()
        for p in pts
    ]
    head = ["## Pareto: per-user decode tok/s vs total tok/s", ""]
    if line is not None:
        head += [f"SLO line: per-user {line:.1f} tok/s (1000 / tpot_ms). Plot: pareto.svg.", ""]
    return head + table(
        ["engine", "level", "total tok/s", "per-user tok/s (median)", "frontier", "SLO line"],
        rows,
    )


def pareto_plot(report: BenchReport) -> str | None:
    series = pareto_points(report)
    if not series or all(len(p) < 2 for p in series.values()):
        return None
    line = slo_line(report)
    xs = [p["total_tps"] for pts in series.values() for p in pts]
    ys = [p["per_user"] for pts in series.values() for p in pts] + ([line] if line else [])
    plot = Plot(
        "Per-user decode tok/s vs total tok/s (one point per level)",
        "total output tok/s",
        "per-user decode tok/s (median)",
        (0.0, max(xs)),
        (0.0, max(ys)),
    )
    for i, (name, pts) in enumerate(series.items()):
        ordered = sorted(pts, key=lambda p: p["total_tps"])
        color = COLORS[i % len(COLORS)]
        plot.line([(p["total_tps"], p["per_user"]) for p in ordered], color, name, markers=True)
    if line is not None:
        plot.line([(plot.x0, line), (plot.x1, line)], "#7f7f7f", "SLO (1000/tpot_ms)")
    return plot.render()
