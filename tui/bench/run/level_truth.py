"""The engine's own account of a whole load level, without poking it while it is measured.

Per-request engine truth for servers that keep it in Prometheus series (vLLM) needs a
scrape of /metrics before and after each request, and is only attributable when exactly
one request ran in between: never at concurrency > 1. There those scrapes only cost the
server work (and, before each request, delayed the send). So the bench takes the
engine's account per level instead: one scrape before the level starts and one after it
ends — both outside the timed window — and reads what the level did from the
differences of the engine's monotonic counters and histogram buckets
(tui/transport/prometheus.py states how a windowed histogram and its quantiles are
computed; quantiles are interpolated inside buckets, so they are estimates as precise
as the engine's bucket bounds):

- vLLM: TTFT, inter-token latency, TPOT, e2e, queue, prefill and decode time
  histograms (count, mean, p50/p90/p99 in ms); prompt and generation token counters;
  prefix-cache hits ÷ queries; preemptions.
- llama-server: prompt tokens ÷ prompt seconds (prefill tok/s per slot, the engine's own
  time on prompts), tokens predicted ÷ predicted seconds (decode tok/s per slot), tokens
  per decode call (``n_decode_total``: how many sequences were batched per step), and the
  token totals. llama-server keeps no per-request latency histograms.

At concurrency 1 the per-request truth stays (an engine's ``request_truth`` mode
"chained": the scrape after one request is the next one's before, so requests follow
each other with one scrape between them, not two), and the level's wall time leaves out
the time between requests (see :func:`pause_between`). The bench counts every request it
made that was not measured (the engine's ``calls``), per level and for its setup.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from tui.transport.prometheus import Scrape, counter_delta, histogram_window

SETTLE_S = 2.0  # longest wait after a level for the engine to count its last requests
SETTLE_POLL_S = 0.05

VLLM_HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft_ms": ("vllm:time_to_first_token_seconds",),
    "itl_ms": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot_ms": ("vllm:request_time_per_output_token_seconds",),
    "e2e_ms": ("vllm:e2e_request_latency_seconds",),
    "queue_ms": ("vllm:request_queue_time_seconds",),
    "prefill_ms": ("vllm:request_prefill_time_seconds",),
    "decode_ms": ("vllm:request_decode_time_seconds",),
}
VLLM_E2E = "vllm:e2e_request_latency_seconds"
LLAMA = {
    "prompt_tokens": "llamacpp:prompt_tokens_total",
    "prompt_seconds": "llamacpp:prompt_seconds_total",
    "predicted_tokens": "llamacpp:tokens_predicted_total",
    "predicted_seconds": "llamacpp:tokens_predicted_seconds_total",
    "decode_calls": "llamacpp:n_decode_total",
}


def vllm_level_truth(a: Scrape, b: Scrape) -> dict[str, Any] | None:
    """vLLM's account of the requests that finished between scrapes a and b."""
    hists: dict[str, Any] = {}
    for key, names in VLLM_HISTOGRAMS.items():
        name = next((n for n in names if b.has(n + "_count")), None)
        if name is None:
            continue
        w = histogram_window(a, b, name)
        q = w.percentiles()
        hists[key] = {
            "count": w.count,
            "mean": _ms(w.mean),
            **{k: _ms(v) for k, v in q.items()},
        }
    if not hists:
        return None

    def delta(name: str) -> float | None:
        return counter_delta(a, b, name)

    hits, queries = delta("vllm:prefix_cache_hits_total"), delta("vllm:prefix_cache_queries_total")
    return {
        "source": "vllm /metrics, scraped before and after the level",
        "requests": delta(VLLM_E2E + "_count"),
        "prompt_tokens": delta("vllm:prompt_tokens_total"),
        "generation_tokens": delta("vllm:generation_tokens_total"),
        "prefix_cache_hit_rate": hits / queries if hits is not None and queries else None,
        "preemptions": delta("vllm:num_preemptions_total"),
        "histograms": hists,
        "quantiles": "interpolated inside the engine's histogram buckets (estimates)",
    }


def llama_server_level_truth(a: Scrape, b: Scrape) -> dict[str, Any] | None:
    """llama-server's account of the level from its ``*_total`` counters."""
    d = {k: counter_delta(a, b, name) for k, name in LLAMA.items()}
    if d["predicted_tokens"] is None:
        return None
    return {
        "source": "llama-server /metrics, scraped before and after the level",
        "prompt_tokens": d["prompt_tokens"],
        "generation_tokens": d["predicted_tokens"],
        "prefill_tps_per_slot": _ratio(d["prompt_tokens"], d["prompt_seconds"]),
        "decode_tps_per_slot": _ratio(d["predicted_tokens"], d["predicted_seconds"]),
        "tokens_per_decode_call": _ratio(d["predicted_tokens"], d["decode_calls"]),
    }


TRUTH_BY_KIND = {"vllm": vllm_level_truth, "llama-server": llama_server_level_truth}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


class LevelTruth:
    """Brackets one level: :meth:`begin` before its first request, :meth:`end` after its
    last (both outside its timed window)."""

    def __init__(self, engine: Any, concurrency: int | None) -> None:
        self.engine = engine
        self.concurrency = concurrency
        self._scrape = getattr(engine, "metrics_scrape", None)
        self._before: Scrape | None = None
        self._calls0: Counter[str] = Counter()
        self._mode: str | None = None

    def _calls(self) -> Counter[str]:
        return Counter(getattr(self.engine, "calls", None) or {})

    async def begin(self) -> None:
        """Scrape once; set the engine's per-request truth for this level (chained at
        c = 1, off above: a window with other requests in it attributes nothing)."""
        mode = getattr(self.engine, "request_truth", None)
        if mode is not None:
            self._mode = mode
            self.engine.request_truth = "chained" if self.concurrency == 1 else "off"
        self._calls0 = self._calls()
        if self._scrape is not None:
            self._before = await self._scrape()

    async def end(self, finished: int) -> tuple[dict[str, Any] | None, dict[str, int]]:
        """(the engine's account of the level or None, the requests the bench made
        during it that were not measured). ``finished``: requests that ended in the
        level; the scrape is retried until the engine counted them (at most SETTLE_S)."""
        truth = None
        if self._scrape is not None and self._before is not None:
            after = await self._settled(finished)
            compute = TRUTH_BY_KIND.get(getattr(self.engine, "kind", ""))
            if after is not None and compute is not None:
                truth = compute(self._before, after)
        if self._mode is not None:
            self.engine.request_truth = self._mode
            clear = getattr(self.engine, "clear_chain", None)
            if callable(clear):
                clear()
        extra = self._calls() - self._calls0
        return truth, dict(sorted(extra.items()))

    async def _settled(self, finished: int) -> Scrape | None:
        assert self._scrape is not None and self._before is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_S
        while True:
            after: Scrape | None = await self._scrape()
            if after is None or getattr(self.engine, "kind", "") != "vllm":
                return after
            counted = counter_delta(self._before, after, VLLM_E2E + "_count")
            if counted is None or counted >= finished or loop.time() > deadline:
                return after
            await asyncio.sleep(SETTLE_POLL_S)


def pause_between(records: list[Any]) -> float:
    """Seconds between one request's end and the next one's start, summed, for a level of
    requests that ran one at a time: the time the bench itself spent between them
    (per-request truth scrapes, and its own turnaround), which the level's wall time
    leaves out at c = 1 when the engine made such scrapes."""
    rs = sorted((r for r in records if r.status != "cancelled"), key=lambda r: r.t_start_s)
    return float(sum(max(0.0, b.t_start_s - a.t_end_s) for a, b in zip(rs, rs[1:])))
