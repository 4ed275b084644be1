"""Context depth in numbers: per --depth level, medians with intervals and ratios to
depth 0 (the Markdown and plots are tui/bench/report/depth.py's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tui.bench.stats.samples import interval_dict, metric_values
from tui.core.stats import median, ratio_ci

if TYPE_CHECKING:
    from tui.bench.run.results import EngineRun

DEPTH_METRICS = ("decode_tps", "ttft_ms", "prefill_tps", "itl_ms")
RATIO_METRICS = ("decode_tps", "ttft_ms")


def summarize_depth(run: EngineRun, n_boot: int) -> list[dict[str, Any]]:
    """One row per measured depth (empty when the bench had no --depth)."""
    by_label = {lv.label: lv for lv in run.levels + run.depth_levels}
    pairs = [(c, by_label[c.level]) for c in run.depth_contexts if c.level in by_label]
    base = next((lv for c, lv in pairs if c.depth == 0), None)
    rows: list[dict[str, Any]] = []
    for ctx, level in pairs:
        depth = ctx.depth
        ok = [r for r in level.records if r.ok]
        prompts = [r.metrics.prompt_tokens for r in ok if r.metrics.prompt_tokens is not None]
        row: dict[str, Any] = {
            "depth": depth,
            "level": level.label,
            "complete": level.complete,
            "context": ctx.to_dict(),
            "counted_depth": ctx.counted_depth,
            "prompt_tokens_median": median([float(p) for p in prompts]) if prompts else None,
            "requests": sum(1 for r in level.records if r.status != "cancelled"),
            "ok": len(ok),
            "failed": sum(1 for r in level.records if r.status == "failed"),
            "medians": {
                k: interval_dict(metric_values(ok, k), n_boot=n_boot) for k in DEPTH_METRICS
            },
            "vs_depth0": {},
        }
        if base is not None and level is not base:
            for k in RATIO_METRICS:
                a, b = metric_values(ok, k), metric_values(base.records, k)
                if a and b and median(b):
                    iv = ratio_ci(a, b, median, n_boot=n_boot)
                    row["vs_depth0"][k] = {"ratio": iv.estimate, "low": iv.low, "high": iv.high}
        rows.append(row)
    return rows
