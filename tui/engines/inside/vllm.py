"""vLLM's inside, from its /metrics (``vllm:`` names, summed over engines; KV use is
their mean):

- ``num_requests_running``, ``num_requests_waiting`` and
  ``num_requests_waiting_by_reason{reason}`` (gauges: capacity = no room in the batch or
  the KV cache; deferred = held back by a transient constraint);
- ``kv_cache_usage_perc`` (0..1; ``gpu_cache_usage_perc`` on older builds);
- ``num_preemptions_total``: preemptions per minute over the window;
- ``prompt_tokens_by_source_total{source}``: the prefix-cache hit rate is
  (local_cache_hit + external_kv_transfer) ÷ all three sources (local_compute too), over
  the window and since start. Not ``prefix_cache_queries`` / ``_hits``: those count the
  lookups of every scheduling step, so a request that waits is counted again each step;
- ``iteration_tokens_total`` (a histogram of tokens per engine step): Δsum ÷ Δcount is
  the mean tokens one step processed in the window (prefill chunks and decode tokens of
  every running request together);
- the ``spec_decode_*`` counters (tui/core/spec.py).
"""

from __future__ import annotations

from tui.core.counter_window import CounterWindow
from tui.core.inside import EngineInside
from tui.engines.inside.values import by_label, mean, spec_counts, spec_values, spec_window, value
from tui.transport.prometheus import Scrape

P = "vllm:"
BY_SOURCE = P + "prompt_tokens_by_source_total"
CACHED_SOURCES = ("local_cache_hit", "external_kv_transfer")
STEPS = P + "iteration_tokens_total"


def read_vllm(t: float, scrape: Scrape, window: CounterWindow) -> EngineInside:
    """One read of vLLM's /metrics; ``window`` holds the earlier reads' counters."""
    sources = by_label(scrape, BY_SOURCE, "source")
    counters: dict[str, float] = {}
    if sources:
        counters["prompt_all"] = sum(sources.values())
        counters["prompt_cached"] = sum(sources.get(s, 0.0) for s in CACHED_SOURCES)
    for name, key in (
        (P + "num_preemptions_total", "preemptions"),
        (STEPS + "_sum", "step_tokens"),
        (STEPS + "_count", "steps"),
    ):
        v = value(scrape, name)
        if v is not None:
            counters[key] = v
    spec = spec_counts(scrape, P + "spec_decode")
    counters.update(spec_values(spec))
    window.add(t, counters)
    hit_total = None
    if counters.get("prompt_all"):
        hit_total = counters["prompt_cached"] / counters["prompt_all"]
    kv = mean(scrape, P + "kv_cache_usage_perc")
    if kv is None:
        kv = mean(scrape, P + "gpu_cache_usage_perc")
    reasons = by_label(scrape, P + "num_requests_waiting_by_reason", "reason")
    return EngineInside(
        kind="vllm",
        t=t,
        running=value(scrape, P + "num_requests_running"),
        waiting=value(scrape, P + "num_requests_waiting"),
        waiting_by_reason=tuple(sorted(reasons.items())),
        kv_usage=None if kv is None else min(kv, 1.0),
        preemptions_per_min=window.per_minute("preemptions"),
        preemptions_total=counters.get("preemptions"),
        prefix_hit_rate=window.ratio("prompt_cached", "prompt_all"),
        prefix_tokens=window.delta("prompt_all"),
        prefix_hit_rate_total=hit_total,
        tokens_per_step=window.ratio("step_tokens", "steps"),
        spec_window=spec_window(window.first(), spec),
        spec_total=spec,
        restarted=window.restarted,
        window_s=window.seconds,
    )
