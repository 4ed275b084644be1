"""Every plot of a report, by file name (each drawn by tui/bench/report/svg.py's Plot)."""

from __future__ import annotations

from tui.bench.report.batching import batching_plot
from tui.bench.report.depth import depth_plots
from tui.bench.report.pareto import pareto_plot
from tui.bench.report.reasoning import run_reasoned
from tui.bench.report.shape import BenchReport
from tui.bench.report.svg import ecdf_plot, headline_records, throughput_plot
from tui.core.metrics import itl_weights_in


def plots(report: BenchReport) -> dict[str, str]:
    recs = headline_records(report)
    ttft = {
        n: [r["metrics"]["ttft_ms"] for r in rs if r["metrics"]["ttft_ms"] is not None]
        for n, rs in recs.items()
    }
    itl = {n: [x for r in rs for x in r["metrics"]["itl_token_ms"]] for n, rs in recs.items()}
    itl_weights = {
        n: [w for r in rs for w in itl_weights_in(r["metrics"])] for n, rs in recs.items()
    }
    extra = depth_plots(report)
    fit = batching_plot(report)
    if fit is not None:
        extra["batching.svg"] = fit
    frontier = pareto_plot(report)
    if frontier is not None:
        extra["pareto.svg"] = frontier
    if run_reasoned(report):  # else TTFO = TTFT: ttft.svg says it all
        ttfo = {
            n: [r["metrics"]["ttfo_ms"] for r in rs if r["metrics"].get("ttfo_ms") is not None]
            for n, rs in recs.items()
        }
        extra["ttfo.svg"] = ecdf_plot(
            "TTFO distribution (warm): first answer token",
            "TTFO ms",
            "fraction of requests ≤ x",
            ttfo,
        )
    return extra | {
        "ttft.svg": ecdf_plot(
            "TTFT distribution (warm)", "TTFT ms", "fraction of requests ≤ x", ttft
        ),
        "itl.svg": ecdf_plot(
            "ITL distribution (warm, per token)",
            "ITL ms",
            "fraction of tokens ≤ x",
            itl,
            itl_weights,
        ),
        "throughput.svg": throughput_plot(report),
    }
