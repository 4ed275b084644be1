"""SVG plots written by hand (no plotting library): distributions and scaling.

- ttft.svg / itl.svg (and ttfo.svg where some request reasoned): empirical CDF per
  engine (x: ms; y: fraction of requests — or of tokens for ITL — at or below x),
  headline level, warm ok requests.
- throughput.svg: total output tok/s against concurrency level, one line per engine.
- depth_tps.svg / depth_ttft.svg, batching.svg: see tui.bench.report.depth and
  tui.bench.report.batching (written when the bench measured depths / a sweep).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from html import escape
from itertools import accumulate
from typing import Any

from tui.bench.report.shape import BenchReport

W, H = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 40, 50
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi] (steps of 1, 2 or 5 × 10^k)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 10) for k in range(first, last + 1)]


class Plot:
    def __init__(
        self,
        title: str,
        xlabel: str,
        ylabel: str,
        x_range: tuple[float, float],
        y_range: tuple[float, float],
    ) -> None:
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.xt = nice_ticks(*x_range)
        self.yt = nice_ticks(*y_range)
        self.x0, self.x1 = self.xt[0], self.xt[-1]
        self.y0, self.y1 = self.yt[0], self.yt[-1]
        self.parts: list[str] = []
        self.legend: list[tuple[str, str]] = []

    def px(self, x: float) -> float:
        return LEFT + (x - self.x0) / ((self.x1 - self.x0) or 1) * (W - LEFT - RIGHT)

    def py(self, y: float) -> float:
        return H - BOTTOM - (y - self.y0) / ((self.y1 - self.y0) or 1) * (H - TOP - BOTTOM)

    def line(
        self,
        pts: list[tuple[float, float]],
        color: str,
        label: str,
        markers: bool = False,
        step: bool = False,
    ) -> None:
        if not pts:
            return
        coords: list[str] = []
        prev_y = None
        for x, y in pts:
            if step and prev_y is not None:
                coords.append(f"{self.px(x):.1f},{self.py(prev_y):.1f}")
            coords.append(f"{self.px(x):.1f},{self.py(y):.1f}")
            prev_y = y
        self.parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(coords)}"/>'
        )
        if markers:
            for x, y in pts:
                self.parts.append(
                    f'<circle cx="{self.px(x):.1f}" cy="{self.py(y):.1f}" r="4" fill="{color}"/>'
                )
        self.legend.append((label, color))

    def render(self, x_labels: dict[float, str] | None = None) -> str:
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
            f'<rect width="{W}" height="{H}" fill="white"/>',
            f'<text x="{W / 2 - RIGHT / 2}" y="22" text-anchor="middle" font-size="15">'
            f"{escape(self.title)}</text>",
        ]
        xb, yb = H - BOTTOM, LEFT
        for t in self.yt:
            y = self.py(t)
            out.append(
                f'<line x1="{yb}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>'
            )
            out.append(f'<text x="{yb - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
        ticks = x_labels if x_labels is not None else {t: f"{t:g}" for t in self.xt}
        for t, label in ticks.items():
            x = self.px(t)
            out.append(f'<line x1="{x:.1f}" y1="{xb}" x2="{x:.1f}" y2="{xb + 5}" stroke="#333"/>')
            out.append(
                f'<text x="{x:.1f}" y="{xb + 18}" text-anchor="middle">{escape(label)}</text>'
            )
        out.append(f'<line x1="{yb}" y1="{xb}" x2="{W - RIGHT}" y2="{xb}" stroke="#333"/>')
        out.append(f'<line x1="{yb}" y1="{TOP}" x2="{yb}" y2="{xb}" stroke="#333"/>')
        out.append(
            f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">'
            f"{escape(self.xlabel)}</text>"
        )
        out.append(
            f'<text transform="translate(16,{(TOP + xb) / 2}) rotate(-90)" '
            f'text-anchor="middle">{escape(self.ylabel)}</text>'
        )
        out += self.parts
        for i, (label, color) in enumerate(self.legend):
            y = TOP + 10 + 18 * i
            out.append(
                f'<rect x="{W - RIGHT + 12}" y="{y - 9}" width="12" height="12" fill="{color}"/>'
            )
            out.append(f'<text x="{W - RIGHT + 30}" y="{y + 1}">{escape(label)}</text>')
        out.append("</svg>\n")
        return "\n".join(out)


def headline_records(report: BenchReport) -> dict[str, list[dict[str, Any]]]:
    heads = {e["name"]: e["headline"] for e in report["summary"]["engines"]}
    return {
        e["name"]: [
            r
            for r in e["records"]
            if r["phase"] == "warm" and r["status"] == "ok" and r["level"] == heads.get(e["name"])
        ]
        for e in report["engines"]
    }


ECDF_POINTS = 400  # a long sample is drawn through this many quantiles (the SVG stays small)


def ecdf_points(values: list[float], weights: list[int] | None = None) -> list[tuple[float, float]]:
    """(x, fraction ≤ x) steps of the empirical CDF; quantile-thinned for long samples.
    With ``weights``, of the multiset in which ``values[i]`` appears ``weights[i]`` times
    (the same points, found by rank without building it)."""
    if weights is None:
        xs = sorted(values)
        n = len(xs)
        if not n:
            return []
        if n <= ECDF_POINTS:
            return [(xs[0], 0.0)] + [(x, (k + 1) / n) for k, x in enumerate(xs)]
        idx = sorted({round(i * (n - 1) / ECDF_POINTS) for i in range(ECDF_POINTS + 1)})
        return [(xs[0], 0.0)] + [(xs[k], (k + 1) / n) for k in idx]
    pairs = sorted((v, w) for v, w in zip(values, weights) if w > 0)
    if not pairs:
        return []
    xs = [v for v, _ in pairs]
    cum = list(accumulate(w for _, w in pairs))
    n = cum[-1]
    ranks: Iterable[int] = range(n)
    if n > ECDF_POINTS:
        ranks = sorted({round(i * (n - 1) / ECDF_POINTS) for i in range(ECDF_POINTS + 1)})
    return [(xs[0], 0.0)] + [(xs[bisect_right(cum, k)], (k + 1) / n) for k in ranks]


def ecdf_plot(
    title: str,
    xlabel: str,
    ylabel: str,
    series: dict[str, list[float]],
    weights: dict[str, list[int]] | None = None,
) -> str:
    """One step line per series; ``weights`` (per series, optional): how many each
    value stands for (:func:`ecdf_points`)."""
    values = [v for vs in series.values() for v in vs]
    hi = max(values) if values else 1.0
    p = Plot(title, xlabel, ylabel, (0.0, hi), (0.0, 1.0))
    for i, (name, vs) in enumerate(series.items()):
        ws = None if weights is None else weights.get(name)
        n = len(vs) if ws is None else sum(ws)
        p.line(ecdf_points(vs, ws), COLORS[i % len(COLORS)], f"{name} (n={n})", step=True)
    return p.render()


def throughput_plot(report: BenchReport) -> str:
    series: dict[str, list[tuple[int, float]]] = {}
    for e in report["summary"]["engines"]:
        series[e["name"]] = [
            (lv["concurrency"], lv["total_tps"])
            for lv in e["levels"]
            if lv["concurrency"] and lv["total_tps"] is not None
        ]
    levels = sorted({c for pts in series.values() for c, _ in pts}) or [1]
    pos = {c: float(i) for i, c in enumerate(levels)}  # evenly spaced, labelled by level
    ys = [y for pts in series.values() for _, y in pts]
    p = Plot(
        "Total output tok/s vs concurrency",
        "concurrent requests",
        "total output tok/s",
        (0.0, max(len(levels) - 1, 1)),
        (0.0, max(ys) if ys else 1.0),
    )
    p.xt = [pos[c] for c in levels] if len(levels) > 1 else [0.0, 1.0]
    p.x0, p.x1 = p.xt[0], p.xt[-1]
    for i, (name, pts) in enumerate(series.items()):
        p.line([(pos[c], y) for c, y in pts], COLORS[i % len(COLORS)], name, markers=True)
    return p.render({pos[c]: str(c) for c in levels})
