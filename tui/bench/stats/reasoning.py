"""A level's reasoning in numbers: how many requests thought, for how long, and their
reasoning and answer tokens apart (each per-request metric is tui.core.metrics's).

A request **reasoned** when it streamed reasoning (its thinking time is defined) or the
engine counted reasoning tokens for it (R > 0). A level without such a request has no
reasoning summary, and its report tables stay as they were before reasoning was measured.

Per level (ok requests only, as every statistic of tui.bench.stats.aggregate):

- medians with percentile-bootstrap 95 % intervals of thinking time, R, A = N − R,
  reasoning tok/s and answer tok/s, each over the requests where it is defined;
- Σ R and Σ A over the level's ok requests;
- estimated: R counted from reasoning chunks (the engine gave no count, per request or
  per chunk), so R and A are estimates; the sources R came from, as recorded.
"""

from __future__ import annotations

from typing import Any

from tui.bench.run.records import RequestRecord
from tui.bench.stats.samples import N_BOOT, interval_dict, metric_values
from tui.core.metrics import RequestMetrics

REASONING_MEDIANS = (
    "thinking_ms",
    "reasoning_tokens",
    "answer_tokens",
    "reasoning_tps",
    "answer_tps",
)
ESTIMATE = "chunk-count-estimate"


def reasoned(m: RequestMetrics) -> bool:
    """The request streamed reasoning or the engine counted reasoning tokens for it."""
    return m.thinking_ms is not None or bool(m.reasoning_tokens)


def reasoning_summary(ok: list[RequestRecord], n_boot: int = N_BOOT) -> dict[str, Any] | None:
    """The level's reasoning figures (module docstring); None when no request reasoned."""
    thought = [r for r in ok if reasoned(r.metrics)]
    if not thought:
        return None
    sources = {r.metrics.reasoning_tokens_source for r in thought}
    return {
        "requests": len(thought),
        "ok": len(ok),
        "answered": sum(1 for r in ok if r.metrics.ttfo_ms is not None),
        "reasoning_tokens": sum(r.metrics.reasoning_tokens or 0 for r in ok),
        "answer_tokens": sum(r.metrics.answer_tokens or 0 for r in ok),
        "reasoning_tokens_sources": sorted(s for s in sources if s is not None),
        "reasoning_tokens_estimated": ESTIMATE in sources,
        "answer_tokens_estimated": any(r.metrics.answer_tokens_estimated for r in thought),
        "medians": {
            k: interval_dict(metric_values(ok, k), n_boot=n_boot) for k in REASONING_MEDIANS
        },
    }
