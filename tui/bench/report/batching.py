"""The batching-model part of a report: Markdown table and a measured-vs-fitted plot.

The fit and its exact definitions are in tui.bench.stats.batching; this renders the
``batching`` entry of each engine's summary.
"""

from __future__ import annotations

from typing import Any

from tui.bench.report.format import DASH, num, table
from tui.bench.report.shape import BenchReport
from tui.bench.report.svg import COLORS, Plot


def _alpha(a: dict[str, Any]) -> str:
    if a.get("low") is None:
        return f"{a['estimate']:.3f}"
    return f"{a['estimate']:.3f} [{a['low']:.3f}, {a['high']:.3f}]"


def batching_markdown(report: BenchReport) -> list[str]:
    """The "Batching model" section: α with its interval, then measured vs fitted per N."""
    engines = [e for e in report["summary"]["engines"] if e.get("batching")]
    fits = [e for e in engines if e["batching"].get("alpha")]
    if not fits:
        return []
    lines = [
        "## Batching model: T_total(N) = N·T_single / (1 + α·N)",
        "",
        "T_total(N): mean client latency (call → last chunk) of the requests at "
        "concurrency N, which with N always in flight is the time per N completed "
        "requests; T_single = T_total(1), measured (N=1 is the anchor, not fitted). α: "
        "least squares over N ≥ 2, 95% bootstrap interval over requests. α = 0: no gain "
        "from concurrency; perfect batching approaches α = 1.",
        "",
    ]
    for e in fits:
        b = e["batching"]
        lines += [
            f"**{e['name']}**: α = {_alpha(b['alpha'])}, T_single {num(b['t_single_ms'])} ms, "
            f"RMS residual {num(b['rmse_ms'])} ms",
            "",
        ]
        rows = [
            [
                str(r["concurrency"]),
                str(r["requests"]),
                num(r["t_total_ms"]),
                num(r["fitted_ms"]) if r["fitted_ms"] is not None else "(anchor)",
                DASH
                if r["residual_ms"] is None
                else f"{r['residual_ms']:+,.1f} ({r['residual_pct']:+.1f}%)",
                num(r["speedup"], 2),
                num(r["speedup_fitted"], 2),
                num(r.get("eta"), 2),
            ]
            for r in b["levels"]
        ]
        lines += table(
            [
                "N",
                "requests",
                "T_total ms",
                "fitted ms",
                "residual ms",
                "speedup N·T_single/T_total",
                "fitted 1 + αN",
                "η (tok/s ratio)",
            ],
            rows,
        )
    for e in engines:
        if not e["batching"].get("alpha") and len(e["levels"]) > 1:
            lines += [f"- {e['name']}: no α fit: {e['batching']['reason']}"]
    lines.append("")
    return lines


def batching_plot(report: BenchReport) -> str | None:
    """batching.svg: measured T_total (points) and the fitted curve (line) against N."""
    fits = {
        e["name"]: e["batching"]
        for e in report["summary"]["engines"]
        if e.get("batching") and e["batching"].get("alpha")
    }
    if not fits:
        return None
    n_max = max(r["concurrency"] for b in fits.values() for r in b["levels"])
    ys = [r["t_total_ms"] for b in fits.values() for r in b["levels"]]
    p = Plot(
        "T_total vs concurrency: measured (points), fitted (lines)",
        "concurrent requests N",
        "T_total ms (time per N requests)",
        (1.0, float(n_max)),
        (0.0, max(ys)),
    )
    for i, (name, b) in enumerate(fits.items()):
        color = COLORS[i % len(COLORS)]
        a, t1 = b["alpha"]["estimate"], b["t_single_ms"]
        steps = 50
        curve = [
            (n, n * t1 / (1 + a * n))
            for n in (1 + (n_max - 1) * k / steps for k in range(steps + 1))
        ]
        p.line(curve, color, f"{name} fit α={a:.2f}")
        for r in b["levels"]:
            p.parts.append(
                f'<circle cx="{p.px(r["concurrency"]):.1f}" cy="{p.py(r["t_total_ms"]):.1f}" '
                f'r="4" fill="{color}"/>'
            )
    return p.render()
