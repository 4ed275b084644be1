"""Did the workload happen as asked? Per level, over its ok requests:

- ``input``: requests with an asked prompt length (tui/bench/run/workload.py) beside the
  engine's count: n, asked min/mean/max, and |counted − asked| p50 and max.
- ``output``: the output length asked of each request (its max_tokens, ignore_eos sent)
  beside the engine's count: n, how many got exactly what was asked, asked min/mean/max.
- ``prompt_tokens``: the engine-counted prompt lengths, min / median / max.
- ``cached_tokens``: prompt tokens the engine says it served from its prefix cache
  (llama-server ``timings.cache_n``; vLLM's /metrics prefix-cache hits where it gives
  them per request), n reporting, min / median / max; None when it reports none.
"""

from __future__ import annotations

from typing import Any

from tui.bench.run.records import RequestRecord
from tui.core.stats import median, percentile


def _spread(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    return {"min": min(xs), "median": median(xs), "max": max(xs)}


def workload_summary(ok: list[RequestRecord]) -> dict[str, Any]:
    pairs = [
        (r.prompt_tokens_target, r.metrics.prompt_tokens)
        for r in ok
        if r.prompt_tokens_target is not None and r.metrics.prompt_tokens is not None
    ]
    errors = [float(abs(c - a)) for a, c in pairs]
    asked_in = [float(a) for a, _ in pairs]
    outs = [(r.max_tokens, r.metrics.output_tokens) for r in ok if r.max_tokens is not None]
    asked_out = [float(a) for a, _ in outs if a is not None]
    cached = [
        float(r.timeline.truth.cached_tokens)
        for r in ok
        if r.timeline.truth is not None and r.timeline.truth.cached_tokens is not None
    ]
    prompts = [float(r.metrics.prompt_tokens) for r in ok if r.metrics.prompt_tokens is not None]
    return {
        "input": {
            "n": len(pairs),
            "asked": {**(_spread(asked_in) or {}), "mean": sum(asked_in) / len(asked_in)}
            if asked_in
            else None,
            "abs_error_p50": percentile(errors, 50) if errors else None,
            "abs_error_max": max(errors) if errors else None,
        },
        "output": {
            "n": len(outs),
            "exact": sum(1 for a, got in outs if a == got),
            "asked": {**(_spread(asked_out) or {}), "mean": sum(asked_out) / len(asked_out)}
            if asked_out
            else None,
        },
        "prompt_tokens": _spread(prompts),
        "cached_tokens": {"n": len(cached), **(_spread(cached) or {})} if cached else None,
        "by_turn": _by_turn(ok),
    }


def _by_turn(ok: list[RequestRecord]) -> list[dict[str, Any]] | None:
    """--turns: per turn number, requests and their median prompt / cached tokens."""
    turns = sorted({r.turn for r in ok if r.turn is not None})
    if not turns:
        return None
    out = []
    for t in turns:
        rs = [r for r in ok if r.turn == t]
        prompts = [float(r.metrics.prompt_tokens) for r in rs if r.metrics.prompt_tokens]
        cached = [
            float(r.timeline.truth.cached_tokens)
            for r in rs
            if r.timeline.truth is not None and r.timeline.truth.cached_tokens is not None
        ]
        out.append(
            {
                "turn": t,
                "requests": len(rs),
                "prompt_tokens_median": median(prompts) if prompts else None,
                "cached_tokens_median": median(cached) if cached else None,
            }
        )
    return out
