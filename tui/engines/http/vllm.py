"""vLLM's OpenAI server, with engine truth taken from its Prometheus /metrics.

vLLM's stream carries no timings, but its /metrics histograms do. Around each request
the engine scrapes /metrics before sending and after the stream ends; when exactly one
request finished in between (e2e_request_latency count grew by 1, read once vLLM runs
no request: :func:`recorded`), that request's
prefill time (request_prefill_time_seconds), decode time (request_decode_time_seconds,
first to last token: N − 1 tokens), queue time and token counters are its own. With
other requests overlapping the window nothing can be attributed, and no engine truth is
reported (never a guess). Option ``metrics_truth = false`` turns the scrapes off, and so
does ``request_truth = "off"`` (the bench at concurrency > 1, where it takes the engine's
account per level instead: tui/bench/level_truth.py); ``"chained"`` (the bench at c = 1)
reuses the scrape after one request as the next one's before.
Option ``continuous_usage_stats = true`` asks vLLM for usage on every chunk, which gives
exact per-chunk token counts. A server started with ``--enable-prompt-tokens-details``
puts ``usage.prompt_tokens_details.cached_tokens`` in each response: that request's own
count of prompt tokens served from the prefix cache, kept as its ``cached_tokens`` (at
any concurrency; with no /metrics truth, the only field of its engine truth). A server
started with ``--enable-per-request-metrics`` reports each request's own queue, prefill
and decode times in its answer (tui/engines/dialects/vllm_request.py): that account is
taken first, at any concurrency, and once a server has given one the /metrics scrapes
around each request stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar

from tui.core.events import EngineTruth
from tui.engines.base import GenerationRequest
from tui.engines.dialects.base import StreamDecoder
from tui.engines.dialects.vllm_request import truth_from_request_metrics
from tui.engines.http.openai_compat import OpenAICompatEngine
from tui.transport.prometheus import Scrape, counter_delta

E2E = "vllm:e2e_request_latency_seconds"
USAGE_CACHED_SOURCE = "vLLM usage.prompt_tokens_details.cached_tokens"


SETTLE_S = 1.0  # vLLM records a finished request's stats just after the last chunk
BUSY_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def recorded(before: Scrape, after: Scrape) -> bool:
    """Whether ``after`` holds vLLM's record of every request that ended before it was
    taken: its count of finished requests grew since ``before``, and it counts no request
    as running or waiting. vLLM sets those gauges and records the requests a step
    finished in one call, so a request it still runs is not yet in the histograms; a
    count that grew by one while a request still runs may be someone else's that ended
    first. Without the gauges (other builds) a grown count is all there is; a count
    missing or reset ends the wait too (nothing better will come)."""
    grown = counter_delta(before, after, E2E + "_count")
    if grown is None:
        return True
    if grown < 1:
        return False
    return all(not after.total(name) for name in BUSY_GAUGES)


def truth_from_scrapes(a: Scrape, b: Scrape) -> EngineTruth | None:
    """The one request that finished between scrapes a and b, or None."""
    if counter_delta(a, b, E2E + "_count") != 1:
        return None

    def seconds(name: str) -> float | None:
        d = counter_delta(a, b, name + "_sum")
        return None if d is None else d * 1000.0

    out = counter_delta(a, b, "vllm:generation_tokens_total")
    prompt = counter_delta(a, b, "vllm:prompt_tokens_total")
    out_n = None if out is None else int(out)
    cached = counter_delta(a, b, "vllm:prefix_cache_hits_total")
    return EngineTruth(
        prompt_tokens=None if prompt is None else int(prompt),
        prompt_eval_tokens=None if prompt is None else int(prompt - (cached or 0)),
        prompt_ms=seconds("vllm:request_prefill_time_seconds"),
        output_tokens=out_n,
        decode_tokens=None if out_n is None else max(out_n - 1, 0),
        decode_ms=seconds("vllm:request_decode_time_seconds"),
        cached_tokens=None if cached is None else int(cached),
        source="vllm /metrics (one request in the window)",
        raw={
            "queue_ms": seconds("vllm:request_queue_time_seconds"),
            "e2e_ms": seconds(E2E),
            "ttft_ms": seconds("vllm:time_to_first_token_seconds"),
            "preemptions": counter_delta(a, b, "vllm:request_num_preemptions_sum"),
        },
    )


class VLLMEngine(OpenAICompatEngine):
    kind: ClassVar[str] = "vllm"

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        self.request_truth = "each"  # "each", "chained" or "off" (see the module docstring)
        self._chained: Scrape | None = None  # the last request's after-scrape (chained)
        self.per_request_metrics = False  # the server reports each request's own metrics

    def clear_chain(self) -> None:
        self._chained = None

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        body = super().build_body(request)
        if self.spec.options.get("continuous_usage_stats"):
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        if request.ignore_eos:
            body["ignore_eos"] = True
        return body

    async def metrics_scrape(self) -> Scrape | None:
        """/metrics now, parsed (None when it cannot be read)."""
        return await self.request_metrics()

    async def before_request(self) -> Any:
        if self.spec.options.get("metrics_truth", True) is False or self.request_truth == "off":
            return None
        if self.per_request_metrics:
            return None
        if self.request_truth == "chained" and self._chained is not None:
            before, self._chained = self._chained, None
            return before
        return await self.request_metrics()

    async def truth_after(self, state: StreamDecoder, context: Any) -> EngineTruth | None:
        cached = state.cached_tokens
        counted = {"prompt_tokens": state.prompt_tokens, "completion_tokens": state.output_tokens}
        own = truth_from_request_metrics(state.extra.get("metrics"), counted, cached)
        if own is not None:
            self.per_request_metrics = True
            return own
        if not isinstance(context, Scrape):
            if cached is None:
                return None
            return EngineTruth(cached_tokens=cached, source=USAGE_CACHED_SOURCE)
        truth = await self._truth_from_metrics(context)
        if truth is not None and cached is not None:
            return dataclasses.replace(truth, cached_tokens=cached)
        return truth

    async def _truth_from_metrics(self, context: Scrape) -> EngineTruth | None:
        deadline = asyncio.get_running_loop().time() + SETTLE_S
        while True:
            after = await self.request_metrics()
            if after is None:
                return None
            done = recorded(context, after)
            if done or asyncio.get_running_loop().time() > deadline:
                if self.request_truth == "chained":
                    self._chained = after
                return truth_from_scrapes(context, after) if done else None
            await asyncio.sleep(0.02)
