"""The in-process llama.cpp engine on the real embedded model (SmolLM2-135M Q4_1)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tui.core.events import EngineReport, Failed, Finished, RequestSent, TextChunk, Usage
from tui.core.metrics import compute_metrics
from tui.engines.base import CancelToken, EngineError, EngineSpec, GenerationRequest
from tui.engines.collect import run_request
from tui.engines.inprocess.llamacpp import LlamaCppEngine

pytestmark = pytest.mark.engine


# One thread: on a few cores shared with other work, llama.cpp's threads spin at barriers
# and a decode step waits for its slowest one, so with every core asked for, a busy
# machine makes it collapse (to a few tok/s); one thread slows in proportion instead.
THREADS = 1


@pytest.fixture(scope="module")
def engine():
    spec = EngineSpec(name="local", kind="llamacpp", model="default", n_threads=THREADS)
    eng = LlamaCppEngine(spec)
    loop = asyncio.new_event_loop()
    load_ms = loop.run_until_complete(eng.load())
    eng._test_load_ms = load_ms
    yield eng
    loop.run_until_complete(eng.close())
    loop.close()


def ask(engine, prompt="Name three colours.", **kw):
    request = GenerationRequest.from_prompt(prompt, **{"max_tokens": 24, "temperature": 0, **kw})
    events = []

    async def go():
        return await run_request(engine, request, events.append)

    return asyncio.run(go()), events


def test_load_reports_cold_load_time_and_info(engine):
    assert 0 < engine._test_load_ms < 60_000
    info = engine.info()
    assert info.kind == "llamacpp" and "SmolLM2" in info.model
    assert info.quantisation == "Q4_1"
    assert info.context_size == 2048
    assert info.parameters["model_bytes"] > 50_000_000


def test_stream_real_tokens_with_honest_counts(engine):
    tl, events = ask(engine)
    assert isinstance(events[0], RequestSent)
    assert isinstance(events[-1], Finished)
    assert tl.text.strip(), "the model said nothing"
    assert all(ch.isprintable() or ch in "\n\t" for ch in tl.text), repr(tl.text)
    m = compute_metrics(tl)
    # token count is the engine's (ids generated), and equals the per-chunk counts
    assert m.output_tokens_source == "usage"
    assert m.output_tokens == sum(c.tokens for c in tl.content_chunks)
    assert 0 < m.output_tokens <= 24
    usage = [e for e in events if isinstance(e, Usage)][-1]
    assert usage.prompt_tokens > 5
    # timestamps are taken in order, in the generation thread
    stamps = [e.t_ns for e in events]
    assert stamps == sorted(stamps)
    assert 0 < m.ttft_ms < m.e2e_ms
    # engine truth from llama.cpp's perf context
    truth = [e for e in events if isinstance(e, EngineReport)][-1].truth
    assert truth.prompt_eval_tokens == usage.prompt_tokens  # cold: nothing cached
    assert truth.prompt_ms > 0 and truth.decode_ms > 0
    assert truth.decode_tokens in (m.output_tokens - 1, m.output_tokens)
    assert m.prefill_tps_source == "engine"
    # our TTFT includes the engine's prefill
    assert m.ttft_ms >= truth.prompt_ms


def test_max_tokens_is_respected(engine):
    tl, _ = ask(engine, "Write a long story about a dragon.", max_tokens=5)
    m = compute_metrics(tl)
    assert m.output_tokens == 5 and tl.finish_reason == "length"


def test_ignore_eos_generates_exactly_max_tokens(engine):
    tl, _ = ask(engine, "Say hi.", max_tokens=40, ignore_eos=True)
    assert compute_metrics(tl).output_tokens == 40


def test_cache_prompt_false_prefills_the_whole_prompt(engine):
    ask(engine, "Tell me about the sea.")
    tl, _ = ask(engine, "Tell me about the sea.", cache_prompt=False)
    assert tl.truth.cached_tokens == 0
    tl2, _ = ask(engine, "Tell me about the sea.", cache_prompt=True)
    assert tl2.truth.cached_tokens > 0  # prefix reuse, reported as such


def test_cancel_stops_within_one_token(engine):
    cancel = CancelToken()
    request = GenerationRequest.from_prompt(
        "Count from one to one hundred.", max_tokens=200, temperature=0, ignore_eos=True
    )
    seen = []

    async def go():
        async for event in engine.stream(request, cancel):
            seen.append(event)
            if (
                isinstance(event, TextChunk)
                and sum(1 for e in seen if isinstance(e, TextChunk)) == 3
            ):
                cancel.cancel()

    asyncio.run(go())
    chunks = [e for e in seen if isinstance(e, TextChunk)]
    assert len(chunks) <= 4  # the token in flight when cancel was set, at most
    assert isinstance(seen[-1], Finished) and seen[-1].reason == "cancelled"


# wall clock: stopping at the next token takes milliseconds (tens on a loaded machine);
# not stopping means 199 more tokens, seconds at this model's speed on one thread
@pytest.mark.timing
def test_closing_the_stream_early_stops_generation(engine):
    request = GenerationRequest.from_prompt("Count to fifty.", max_tokens=200, ignore_eos=True)

    async def go():
        agen = engine.stream(request)
        async for event in agen:
            if isinstance(event, TextChunk):
                break
        t0 = time.perf_counter()
        await agen.aclose()
        return time.perf_counter() - t0

    # aclose waits for the thread; it stops at the next token (~10 ms here), not 200
    assert asyncio.run(go()) < 2.0
    tl, _ = ask(engine, "Hi")  # the engine is still usable
    assert tl.finish_reason in ("stop", "length")


def test_loop_is_not_blocked_during_generation(engine):
    request = GenerationRequest.from_prompt("Describe a forest.", max_tokens=40, ignore_eos=True)

    async def go():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        await run_request(engine, request)
        stop.set()
        await task
        return ticks

    assert asyncio.run(go()) > 20


def test_empty_prompt_and_bad_max_tokens_are_refused():
    with pytest.raises(EngineError, match="empty"):
        GenerationRequest.from_prompt("   ").validate()
    with pytest.raises(EngineError, match="at least 1"):
        GenerationRequest.from_prompt("hi", max_tokens=0).validate()


def test_stream_before_load_fails_cleanly():
    eng = LlamaCppEngine(EngineSpec(name="x", kind="llamacpp"))

    async def go():
        return [e async for e in eng.stream(GenerationRequest.from_prompt("hi"))]

    events = asyncio.run(go())
    assert [type(e) for e in events] == [RequestSent, Failed]  # the stream contract holds
    assert events[1].kind == "load" and "not loaded" in events[1].message


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", "too short"),
        (b"NOPE" + b"\0" * 64, "bad magic"),
    ],
)
def test_not_a_gguf_is_a_clear_error(tmp_path, content, match):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    eng = LlamaCppEngine(EngineSpec(name="x", kind="llamacpp", model=str(bad)))
    with pytest.raises(EngineError, match=match):
        asyncio.run(eng.load())


def test_truncated_gguf_is_a_clear_error(tmp_path, model_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(model_path.read_bytes()[:4_000_000])
    eng = LlamaCppEngine(EngineSpec(name="x", kind="llamacpp", model=str(cut)))
    with pytest.raises(EngineError, match="could not load"):
        asyncio.run(eng.load())


def test_missing_model_path(tmp_path):
    eng = LlamaCppEngine(EngineSpec(name="x", kind="llamacpp", model=str(tmp_path / "no.gguf")))
    with pytest.raises(EngineError, match="model file not found"):
        asyncio.run(eng.load())


def test_queued_request_counts_its_wait_in_ttft(engine):
    """Two requests at once on one model: the second waits for the first, and that wait
    is inside its TTFT (sent = submitted), as a server's queue time would be."""
    req = dict(max_tokens=12, temperature=0, ignore_eos=True)

    async def go():
        a = GenerationRequest.from_prompt("One.", **req)
        b = GenerationRequest.from_prompt("Two.", **req)
        return await asyncio.gather(run_request(engine, a), run_request(engine, b))

    first, second = asyncio.run(go())
    assert abs(first.t_sent_ns - second.t_sent_ns) < 50_000_000  # both sent together
    m1, m2 = compute_metrics(first), compute_metrics(second)
    assert m2.ttft_ms > m1.e2e_ms


def test_seed_makes_sampling_repeatable(engine):
    a, _ = ask(engine, "Tell me a story.", temperature=1.0, seed=123, max_tokens=16)
    b, _ = ask(engine, "Tell me a story.", temperature=1.0, seed=123, max_tokens=16)
    assert a.text == b.text
    others = {
        ask(engine, "Tell me a story.", temperature=1.0, seed=s, max_tokens=16)[0].text
        for s in (1, 2, 3)
    }
    assert len(others | {a.text}) > 1, "the seed changes nothing"


def test_extra_buffer_types_off_only_where_amx_code_meets_an_amx_cpu():
    from tui.engines.inprocess.llamacpp import extra_bufts_choice

    amx_cpu = frozenset({"avx2", "avx512f", "amx_tile", "amx_int8"})
    plain_cpu = frozenset({"avx2", "fma"})
    amx_build = "CPU : AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |"
    our_build = "CPU : AVX2 = 1 | AVX512 = 1 | REPACK = 1 |"
    assert extra_bufts_choice("auto", amx_build, amx_cpu)[0] is False
    assert extra_bufts_choice(None, amx_build, plain_cpu)[0] is True
    assert extra_bufts_choice("auto", our_build, amx_cpu)[0] is True
    assert extra_bufts_choice(False, our_build, plain_cpu) == (False, "set in config")
    with pytest.raises(EngineError, match="use_extra_bufts"):
        extra_bufts_choice("no", our_build, plain_cpu)


def test_loading_without_extra_buffer_types_still_answers():
    """The escape hatch for a native build on an AMX CPU: no repacking, same answer."""
    spec = EngineSpec(
        name="x", kind="llamacpp", n_threads=THREADS, options={"use_extra_bufts": False}
    )
    eng = LlamaCppEngine(spec)

    async def go():
        await eng.load()
        try:
            assert eng.info().parameters["use_extra_bufts"] is False
            return await run_request(
                eng, GenerationRequest.from_prompt("Say hi.", max_tokens=6, temperature=0)
            )
        finally:
            await eng.close()

    tl = asyncio.run(go())
    assert tl.error is None and compute_metrics(tl).output_tokens == 6
