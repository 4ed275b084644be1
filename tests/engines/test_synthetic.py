"""The synthetic engine: paced tokens stamped in its thread, faults on demand."""

from __future__ import annotations

import pytest

import tui.engines.inprocess.synthetic as synthetic_module
from tests.support.virtual_time import VirtualClock
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


async def test_pace_ttft_and_token_counts(monkeypatch):
    """Token i is due at sent + TTFT + i / rate (an absolute schedule), stamped in the
    generating thread. On virtual time (tests/support/virtual_time.py: the engine's clock
    moves only by its own sleeps) the stamps are exactly that schedule on any machine."""
    clock = VirtualClock()
    monkeypatch.setattr(synthetic_module, "time", clock.time)
    e = engine(tokens_per_s=500, ttft_ms=30)
    await e.load()
    tl, events = await run(e, 100)
    m = compute_metrics(tl)
    assert isinstance(events[0], RequestSent) and isinstance(events[-1], Finished)
    assert m.output_tokens == 100 and m.output_tokens_source == "usage"
    assert m.prompt_tokens == 3
    assert tl.chunk_ns == [tl.t_sent_ns + 30_000_000 + i * 2_000_000 for i in range(100)]
    assert m.ttft_ms == pytest.approx(30.0)
    assert m.decode_tps == pytest.approx(500)
    assert m.itl_ms_p50 == pytest.approx(2.0)
    assert tl.truth is not None and tl.truth.decode_ms == pytest.approx(99 * 2.0)


async def test_no_token_is_stamped_before_it_is_due():
    """On the real clock, at any load: the thread sleeps to each token's due time, so a
    token can be late (a busy machine) but never early, and the engine's own decode time
    is the span of the stamps the client got."""
    e = engine(tokens_per_s=1000, ttft_ms=5)
    await e.load()
    tl, _ = await run(e, 40)
    due = [tl.t_sent_ns + 5_000_000 + i * 1_000_000 for i in range(40)]
    assert len(tl.chunk_ns) == 40
    assert all(t >= d for t, d in zip(tl.chunk_ns, due, strict=True))
    assert tl.chunk_ns == sorted(tl.chunk_ns)
    assert tl.truth is not None
    assert tl.truth.decode_ms == (tl.chunk_ns[-1] - tl.chunk_ns[0]) / 1e6


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


async def test_reasoning_think_tags_and_a_tool_call(monkeypatch):
    """``reasoning_tokens``: the first N tokens are REASONING chunks and usage counts
    them; ``think_tags``: the same reasoning written inside <think> tags in the text and
    split apart again by the HTTP engines' splitter (so usage says nothing of it; the
    chunks do); ``tool_call``: the last four tokens are TOOL chunks. On virtual time TTFO
    is exactly N tokens after TTFT."""
    monkeypatch.setattr(synthetic_module, "time", VirtualClock().time)
    call = ["lookup(", '{"topic": ', '"decode"}', ")"]
    for tags in (False, True):
        e = engine(tokens_per_s=100, ttft_ms=20, reasoning_tokens=5, tool_call="lookup",
                   think_tags=tags)  # fmt: skip
        await e.load()
        tl, _ = await run(e, 12)
        assert tl.parts == ["reasoning"] * 5 + ["answer"] * 3 + ["tool"] * 4
        assert tl.chunk_tokens == [1] * 12 and "think>" not in "".join(tl.chunk_text)
        assert tl.reasoning_text == "The user asks about the"
        assert tl.text == "Prefill reads the" + "".join(call)
        assert tl.usage_reasoning_tokens == (None if tags else 5)
        m = compute_metrics(tl)
        assert m.reasoning_tokens == 5 and m.answer_tokens == 7
        assert m.reasoning_tokens_source == ("engine-chunks" if tags else "usage")
        assert m.ttfo_ms == pytest.approx(20.0 + 5 * 10.0) and m.ttft_ms == pytest.approx(20.0)
    # the reasoning outlasts max_tokens: all of it reasoning, the call never starts
    tl, _ = await run(engine(tokens_per_s=1000, reasoning_tokens=50, tool_call="f"), 6)
    assert tl.parts == ["reasoning"] * 6 and tl.text == ""
    with pytest.raises(EngineError, match="reasoning_tokens must be >= 0"):
        engine(reasoning_tokens=-1)
