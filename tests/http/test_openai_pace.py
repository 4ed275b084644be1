"""Measurement against the pace server, whose timing is known (20 ms TTFT, 10 ms gaps)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import urllib.request

from tests.support import pace_server
from tests.support.stream_check import collect
from tui.core.events import Finished, TextChunk
from tui.engines.base import CancelToken, EngineSpec, GenerationRequest
from tui.engines.http.openai_compat import OpenAICompatEngine, listed_context_size


def engine(url: str, **kw: object) -> OpenAICompatEngine:
    return OpenAICompatEngine(EngineSpec(name="pace", kind="openai", url=url, **kw))  # type: ignore[arg-type]


def req(n: int = 16) -> GenerationRequest:
    return GenerationRequest.from_prompt("one two three", max_tokens=n)


async def test_load_finds_the_model(pace: str) -> None:
    e = engine(pace + "/v1")  # a trailing /v1 in the URL is accepted
    ms = await e.load()
    assert ms > 0 and e.model == "pace" and e.info().model == "pace"
    assert e.info().context_size is None  # the pace server's listing has no max_model_len
    await e.close()


def test_context_size_is_the_chosen_models_max_model_len() -> None:
    listed = [{"id": "a", "max_model_len": 4096}, {"id": "b", "max_model_len": 1024}]
    assert listed_context_size(listed, "b") == 1024
    assert listed_context_size(listed, "c") is None
    assert listed_context_size([{"id": "a"}], "a") is None
    for bad in ("4096", True, 0, None):
        assert listed_context_size([{"id": "a", "max_model_len": bad}], "a") is None


async def test_numbers_match_the_known_pace(pace: str) -> None:
    r = await collect(engine(pace), req(16))
    m = r.metrics
    assert r.failed is None and m.finish_reason == "length"
    assert m.output_tokens == 16 and m.output_tokens_source == "usage"
    assert m.prompt_tokens == 3
    # The role-only chunk arrives at once; it marks TTFR but is not the first token.
    assert m.ttfr_ms is not None and m.ttft_ms is not None and m.ttfr_ms < m.ttft_ms
    assert 20.0 <= m.ttft_ms < 80.0
    assert 9.0 < statistics.median(m.itl_chunk_ms) < 11.5
    assert m.decode_tps is not None and 85 < m.decode_tps < 105


async def test_a_slow_consumer_does_not_change_the_stamps(pace: str) -> None:
    """The consumer blocks 30 ms per event (3x the token gap); ITL must still be 10 ms."""
    r = await collect(engine(pace), req(12), block_consumer_s=0.03)
    assert r.failed is None and r.metrics.content_chunks == 12
    assert 9.0 < statistics.median(r.metrics.itl_chunk_ms) < 11.5
    assert r.metrics.e2e_ms is not None and r.metrics.e2e_ms < 250  # not 12 x 30 ms


async def test_cancel_keeps_partial_text_and_stops_the_server(pace: str) -> None:
    e = engine(pace)
    cancel = CancelToken()
    events = []
    async for ev in e.stream(GenerationRequest.from_prompt("x", max_tokens=500), cancel):
        events.append(ev)
        if sum(isinstance(x, TextChunk) for x in events) == 3:
            cancel.cancel()
    assert isinstance(events[-1], Finished) and events[-1].reason == "cancelled"
    assert events[-1].model == "pace"  # the model its chunks named, though it was cut
    assert sum(isinstance(x, Finished) for x in events) == 1
    texts = [x.text for x in events if isinstance(x, TextChunk)]
    assert texts[:3] == ["tok0 ", "tok1 ", "tok2 "] and len(texts) < 20
    await asyncio.sleep(0.2)
    with urllib.request.urlopen(pace + "/stats") as resp:
        assert json.load(resp)["tokens"] < 500 * 10  # the server stopped early


async def test_concurrent_streams_all_complete(pace: str) -> None:
    e = engine(pace)
    results = await asyncio.gather(*(collect(e, req(10)) for _ in range(6)))
    assert all(r.failed is None for r in results)
    assert [r.metrics.output_tokens for r in results] == [10] * 6
    assert all(r.text.startswith("tok0 tok1") for r in results)
    await e.close()


async def test_completions_endpoint(pace: str) -> None:
    r = await collect(engine(pace, endpoint="completions"), req(5))
    assert r.failed is None and r.text == "tok0 tok1 tok2 tok3 tok4 "
    assert r.metrics.output_tokens == 5


async def test_without_usage_the_count_is_labelled_an_estimate(pace: str) -> None:
    e = engine(pace, options={"extra_body": {"stream_options": {"include_usage": False}}})
    r = await collect(e, req(7))
    assert r.failed is None and r.metrics.content_chunks == 7
    assert r.metrics.output_tokens_source == "chunk-count-estimate"
    assert r.metrics.output_tokens_estimated


async def test_consumer_closing_the_stream_stops_the_request() -> None:
    """Closing the event generator early cancels the HTTP read; the server sees it."""
    port, srv, stop = pace_server.start_in_thread(pace_server.PaceConfig(interval_ms=5))
    try:
        e = engine(f"http://127.0.0.1:{port}")
        gen = e.stream(GenerationRequest.from_prompt("x", max_tokens=400))
        async with contextlib.aclosing(gen):
            n = 0
            async for ev in gen:
                n += isinstance(ev, TextChunk)
                if n == 3:
                    break
        await asyncio.sleep(0.3)
        sent = srv.stats.tokens_sent
        await asyncio.sleep(0.2)
        assert sent < 100 and srv.stats.tokens_sent == sent and srv.stats.active == 0
        await e.close()
    finally:
        stop()
