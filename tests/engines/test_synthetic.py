"""The synthetic engine: paced tokens stamped in its thread, faults on demand."""

from __future__ import annotations

import pytest

from tui.core.events import Failed, Finished, RequestSent, TextChunk
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.base import CancelToken, EngineError, EngineSpec, GenerationRequest
from tui.engines.registry import create_engine


def engine(**options):  # type: ignore[no-untyped-def]
    return create_engine(EngineSpec(name="s", kind="synthetic", options=options))


async def run(e, max_tokens=20, cancel=None):  # type: ignore[no-untyped-def]
    tl = RequestTimeline()
    events = []
    async for ev in e.stream(GenerationRequest.from_prompt("a b c", max_tokens=max_tokens), cancel):
        tl.add(ev)
        events.append(ev)
    return tl, events


async def test_pace_ttft_and_token_counts():
    e = engine(tokens_per_s=500, ttft_ms=30)
    await e.load()
    tl, events = await run(e, 100)
    m = compute_metrics(tl)
    assert isinstance(events[0], RequestSent) and isinstance(events[-1], Finished)
    assert m.output_tokens == 100 and m.output_tokens_source == "usage"
    assert m.prompt_tokens == 3
    assert 29.5 <= m.ttft_ms < 45
    assert m.decode_tps == pytest.approx(500, rel=0.05)
    assert m.itl_ms_p50 == pytest.approx(2.0, abs=0.3)


async def test_cancel_and_fault_and_bad_options():
    e = engine(tokens_per_s=100)
    await e.load()
    token = CancelToken()
    token.cancel()
    tl, events = await run(e, 50, token)
    assert tl.finish_reason == "cancelled" and len(tl.content_chunks) == 0
    e2 = engine(fail_after=3, tokens_per_s=1000)
    tl, events = await run(e2, 10)
    assert isinstance(events[-1], Failed) and tl.text.count(" ") == 2
    assert sum(isinstance(x, TextChunk) for x in events) == 3
    with pytest.raises(EngineError, match="unknown synthetic option"):
        engine(speed=3)
    with pytest.raises(EngineError, match="boom"):
        await engine(fail_load="boom").load()
