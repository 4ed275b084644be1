"""vLLM's Prometheus /metrics: load, KV cache, and windowed latency percentiles.

Each :meth:`VLLMMetrics.sample` scrapes once and compares with the previous scrape, so
percentiles describe only the requests that finished in between (see
:mod:`tui.transport.prometheus` for the bucket-delta definition). Gauges
(num_requests_running / waiting, kv_cache_usage_perc) are read as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.transport.access import HttpAccess
from tui.transport.prometheus import (
    HistogramWindow,
    Scrape,
    counter_delta,
    counter_rate,
    fetch,
    histogram_window,
)

# Our short name -> vLLM series, newest name first (vLLM renamed some across versions).
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "queue": ("vllm:request_queue_time_seconds",),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
}
KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
CACHE_CONFIG = "vllm:cache_config_info"  # an info gauge: its labels are the cache config


def _first(scrape: Scrape, names: tuple[str, ...], suffix: str = "") -> str | None:
    for n in names:
        if scrape.has(n + suffix):
            return n
    return None


def _mean(scrape: Scrape, name: str) -> float | None:
    """The mean of gauge ``name`` over its label sets: a data-parallel server has one KV
    cache per engine (label ``engine``), each gauge a share of its own cache."""
    values = list(scrape.samples.get(name, {}).values())
    return sum(values) / len(values) if values else None


@dataclass
class VLLMSample:
    """One scrape compared with the previous one. Times in seconds; kv_cache in 0..1 (the
    engines' mean); running, waiting and rates summed over engines."""

    t: float
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    prompt_tokens_total: float | None
    generation_tokens_total: float | None
    prompt_tps: float | None = None  # prompt tokens/s over the window
    generation_tps: float | None = None  # generated tokens/s over the window
    preemptions: float | None = None  # in the window
    windows: dict[str, HistogramWindow] = field(default_factory=dict)
    cache_config: dict[str, str] = field(default_factory=dict)  # num_gpu_blocks, block_size

    def percentiles_ms(self, name: str) -> dict[str, float | None]:
        """p50/p90/p99 of one histogram in ms (None: nothing finished in the window)."""
        w = self.windows.get(name)
        if w is None:
            return {"p50": None, "p90": None, "p99": None}
        return {k: (None if v is None else v * 1000) for k, v in w.percentiles().items()}


def summarize(prev: Scrape | None, cur: Scrape) -> VLLMSample:
    """Gauges from ``cur``; rates and windowed histograms from ``cur`` − ``prev``."""
    kv_name = _first(cur, KV_CACHE)
    s = VLLMSample(
        t=cur.t,
        running=cur.total("vllm:num_requests_running"),
        waiting=cur.total("vllm:num_requests_waiting"),
        kv_cache_usage=_mean(cur, kv_name) if kv_name else None,
        prompt_tokens_total=cur.total("vllm:prompt_tokens_total"),
        generation_tokens_total=cur.total("vllm:generation_tokens_total"),
    )
    for labels in cur.samples.get(CACHE_CONFIG, {}):
        s.cache_config = dict(labels)
        break
    for short, names in HISTOGRAMS.items():
        name = _first(cur, names, "_bucket")
        if name is not None:
            s.windows[short] = histogram_window(prev, cur, name)
    if prev is not None:
        s.prompt_tps = counter_rate(prev, cur, "vllm:prompt_tokens_total")
        s.generation_tps = counter_rate(prev, cur, "vllm:generation_tokens_total")
        s.preemptions = counter_delta(prev, cur, "vllm:num_preemptions_total")
    return s


class VLLMMetrics:
    """Scrapes ``BASE/metrics`` and keeps the previous scrape for windowed numbers."""

    def __init__(
        self, base_url: str, timeout_s: float = 2.0, access: HttpAccess | None = None
    ) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.timeout_s = timeout_s
        self.access = access
        self.previous: Scrape | None = None

    def sample(self) -> VLLMSample:
        """Scrape now (blocking); raises ScrapeError with a one-line reason."""
        cur = fetch(self.url, self.timeout_s, self.access)
        out = summarize(self.previous, cur)
        self.previous = cur
        return out
