"""A pace engine for bench tests: one token every ``token_ms``, known capacity.

Not a stub of any real engine: it exists so the concurrency arithmetic has a known answer.
Each request waits for one of ``slots`` slots (its parallel capacity), then ``ttft_ms``,
then emits ``max_tokens`` tokens, one chunk each, ``token_ms`` apart, stamped when
produced. Per-request speed is therefore known: decode tok/s = 1000 / token_ms, and with
c ≤ slots requests in flight the total rate is c times the single-request rate (η = c);
with c > slots it saturates at η = slots.

Options (EngineSpec.options): ttft_ms, token_ms, slots, fail ("always" fails every
request), reload_ms (restart hook), tokenizer (bool: offer count_prompt_tokens),
template_tokens (the pretend chat template's length), late_sent (bool: stamp
RequestSent only once a slot is free, like an engine whose queue sits before its own
clock starts), think_tokens (the first N tokens of each answer are reasoning, so TTFO =
ttft_ms + N · token_ms), reasoning_count (how the engine counts them: "chunks" — each
chunk says it carries 1 token —, "usage" — a reasoning count in its usage —, or "none" —
no per-chunk counts and none in usage, so the bench estimates R from the chunks).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from tui.core.cancel import CancelToken
from tui.core.events import (
    ANSWER,
    REASONING,
    Failed,
    Finished,
    RequestSent,
    StreamEvent,
    TextChunk,
    Usage,
)
from tui.engines.base import EngineInfo, GenerationRequest, GeneratorEngine

TEMPLATE_TOKENS = 7  # a pretend chat template
# what register(..., options=OPTIONS) declares, so config validation accepts them
_NUM = (int, float)
OPTIONS: dict[str, tuple[type, ...]] = {
    "ttft_ms": _NUM,
    "token_ms": _NUM,
    "slots": (int,),
    "fail": (str,),
    "reload_ms": _NUM,
    "tokenizer": (bool,),
    "template_tokens": (int,),
    "late_sent": (bool,),
    "think_tokens": (int,),
    "reasoning_count": (str,),
}


def count_tokens(request: GenerationRequest, template: int = TEMPLATE_TOKENS) -> int:
    return template + sum(len(m["content"].split()) for m in request.messages)


class PaceEngine(GeneratorEngine):
    kind = "pace"

    def __init__(self, spec) -> None:  # type: ignore[no-untyped-def]
        super().__init__(spec)
        o = spec.options
        self.ttft_ms = float(o.get("ttft_ms", 20))
        self.token_ms = float(o.get("token_ms", 10))
        self.slots = int(o.get("slots", 64))
        self.fail = o.get("fail")
        self.reload_ms = float(o.get("reload_ms", 30))
        self.template = int(o.get("template_tokens", TEMPLATE_TOKENS))
        self.think = int(o.get("think_tokens", 0))
        self.reasoning_count = str(o.get("reasoning_count", "chunks"))
        self._sem: asyncio.Semaphore | None = None
        if o.get("tokenizer", True):
            self.count_prompt_tokens = self._count  # type: ignore[attr-defined]

    async def _count(self, request: GenerationRequest) -> int:
        return count_tokens(request, self.template)

    async def load(self) -> float:
        t0 = time.perf_counter_ns()
        self._sem = asyncio.Semaphore(self.slots)
        await asyncio.sleep(self.reload_ms / 1000)
        return (time.perf_counter_ns() - t0) / 1e6

    cold_start_method = "pace engine: sleep reload_ms"

    async def restart(self) -> float:
        return await self.load()

    async def capacity(self) -> int:
        return self.slots

    def info(self) -> EngineInfo:
        return EngineInfo(engine=self.spec.name, kind=self.kind, model="pace")

    async def events(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        now = time.perf_counter_ns
        late = bool(self.spec.options.get("late_sent"))
        if not late:
            yield RequestSent(now())
        if self.fail == "always":
            await asyncio.sleep(0.001)
            yield Failed(now(), "pace engine: told to fail every request", "http")
            return
        assert self._sem is not None
        async with self._sem:
            if late:
                yield RequestSent(now())
            await asyncio.sleep(self.ttft_ms / 1000)
            for i in range(request.max_tokens):
                if cancel is not None and cancel.cancelled:
                    yield Usage(now(), count_tokens(request, self.template), i)
                    yield Finished(now(), "cancelled")
                    return
                if i:
                    await asyncio.sleep(self.token_ms / 1000)
                part = REASONING if i < self.think else ANSWER
                per_chunk = None if self.reasoning_count == "none" else 1
                yield TextChunk(now(), f" t{i}", per_chunk, part)
        thought = min(self.think, request.max_tokens) if self.reasoning_count == "usage" else None
        yield Usage(now(), count_tokens(request, self.template), request.max_tokens, thought)
        yield Finished(now(), "length")
