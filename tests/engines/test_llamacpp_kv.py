"""The KV line's data on the real in-process model: a three-turn conversation."""

from __future__ import annotations

import asyncio

import pytest

from tui.core.events import ContextFill, Finished, TextChunk, Usage
from tui.core.kv import KvLayout, state_from_fill
from tui.engines.base import EngineError, EngineSpec, GenerationRequest
from tui.engines.collect import run_request
from tui.engines.inprocess.llamacpp import LlamaCppEngine
from tui.engines.inprocess.llamacpp_generate import KV_FILL_EVERY

pytestmark = pytest.mark.engine

QUESTIONS = ["Name three colours.", "Why is the sky blue?", "And the sea?"]


def test_context_grows_across_three_turns_and_matches_the_engine(model_path):
    async def go():
        eng = LlamaCppEngine(
            EngineSpec(name="local", kind="llamacpp", model="default", n_threads=2, n_ctx=1024)
        )
        await eng.load()
        layout = KvLayout.from_dict(eng.info().parameters["kv_layout"])
        messages: list[dict[str, str]] = []
        turns = []
        for q in QUESTIONS:
            messages.append({"role": "user", "content": q})
            events: list = []
            request = GenerationRequest(messages=list(messages), max_tokens=12, temperature=0)
            tl = await run_request(eng, request, events.append)
            turns.append((events, eng._llm.n_tokens))  # the engine's own count, after the turn
            messages.append({"role": "assistant", "content": tl.text})
        await eng.close()
        return layout, turns

    layout, turns = asyncio.run(go())
    assert layout.bytes_per_token == 30 * 2 * 3 * 64 * 2  # the file's metadata, f16
    finals = []
    for events, n_tokens in turns:
        fills = [e for e in events if isinstance(e, ContextFill)]
        usage = next(e for e in events if isinstance(e, Usage))
        finished = next(e for e in events if isinstance(e, Finished))
        n_chunks = sum(1 for e in events if isinstance(e, TextChunk) and e.text)
        # prefill end: the whole prompt is in the cache, before the first token is drawn
        first_text = next(e for e in events if isinstance(e, TextChunk) and e.text)
        assert fills[0].tokens == usage.prompt_tokens and fills[0].t_ns <= first_text.t_ns
        # live while decoding: one more fill every KV_FILL_EVERY tokens, never shrinking
        assert len(fills) >= 2 + (usage.output_tokens - 1) // KV_FILL_EVERY
        assert [f.tokens for f in fills] == sorted(f.tokens for f in fills)
        assert all(f.n_ctx == 1024 for f in fills)
        # the end: the engine's own count — the prompt, then every generated token that
        # was fed back (the last one drawn at max_tokens is not)
        assert fills[-1].tokens == n_tokens
        fed_back = usage.output_tokens - (1 if finished.reason == "length" else 0)
        assert n_tokens == usage.prompt_tokens + fed_back
        assert n_chunks <= usage.output_tokens
        state = state_from_fill(fills[-1].tokens, fills[-1].n_ctx, layout)
        assert state.kv_bytes == n_tokens * 30 * 2 * 3 * 64 * 2
        finals.append(n_tokens)
    assert finals[0] < finals[1] < finals[2], finals


def test_bad_cache_type_option_is_named(model_path):
    eng = LlamaCppEngine(
        EngineSpec(name="local", kind="llamacpp", model="default", options={"type_k": "q9"})
    )
    with pytest.raises(EngineError, match=r"options.type_k must be a KV cache type .*'q9'"):
        asyncio.run(eng.load())


def test_quantised_cache_option_reaches_the_layout(model_path):
    async def go():
        spec = EngineSpec(
            name="local",
            kind="llamacpp",
            model="default",
            n_threads=2,
            n_ctx=256,
            options={"type_k": "q8_0", "type_v": "q8_0"},
        )
        eng = LlamaCppEngine(spec)
        await eng.load()
        info = eng.info()
        tl = await run_request(eng, GenerationRequest.from_prompt("Hi", max_tokens=4))
        await eng.close()
        return info, tl

    info, tl = asyncio.run(go())
    layout = KvLayout.from_dict(info.parameters["kv_layout"])
    assert layout.cache_type == "q8_0"
    assert layout.bytes_per_token == 30 * 3 * 64 * 2 * 34 / 32
    assert tl.error is None and tl.text  # the quantised cache really runs
