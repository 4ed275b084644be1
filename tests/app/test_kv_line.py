"""The KV line in the chat screen (and its short form in the narrow strip): it shows, and
grows, across a three-turn conversation on the real model; and its text for llama-server
and vLLM states."""

from __future__ import annotations

import json
import re

import pytest

from tests.app.app_support import LOCAL, gen, submit
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.kv_line import KvLine, kv_lines, size_text
from tui.core.kv import KvLayout, state_from_fill, state_from_vllm

SMOLLM2 = KvLayout(n_layers=30, n_kv_heads=3, kv_heads_total=90, head_dim_k=64, head_dim_v=64)
LINE = re.compile(r"KV ([\d,]+) / 2,048 tok \((\d+)%\) ▕(█*)░*▏")


@pytest.mark.engine
async def test_kv_line_grows_across_three_turns(make_config, build_app, wait_for, tmp_path):
    app = build_app(make_config(gen(6) + LOCAL))
    seen: list[int] = []
    async with app.run_test(size=(80, 24)) as pilot:  # the strip too (narrow layout)
        kv = app.chat.query_one(KvLine)
        conv = app.chat.query_one("#conv-A", Conversation)
        assert not kv.display  # nothing to show before the engine has said anything
        for i, q in enumerate(["Name a colour.", "Name a fruit.", "Name a city."]):
            await submit(pilot, q)
            await wait_for(pilot, lambda i=i: len(conv.turns) > i and conv.turns[i].finished)
            live = app.core.live["A"]
            assert live is not None and live.done and live.context_fill is not None
            final = live.context_fill  # the engine's last count of this turn
            await wait_for(pilot, lambda f=final: kv.state is not None and kv.state.t_ns == f.t_ns)
            assert kv.display
            first, second = kv.text.splitlines()
            m = LINE.match(first)
            assert m, first
            tokens = int(m.group(1).replace(",", ""))
            assert int(m.group(2)) == round(100 * tokens / 2048)
            assert f"= {tokens:,} tok × 22.5 KiB (f16, 30 layers × 3 kv heads × 64)" in second
            assert "estimate" not in second  # in-process: every number is the engine's own
            strip = str(app.chat.query_one("#strip").render())
            assert f"KV {tokens:,}/2,048 tok {size_text(tokens * 23_040)}" in strip, strip
            seen.append(tokens)
    assert seen[0] < seen[1] < seen[2], seen
    # the line's count is the engine's: the prompt plus the answer fed back into the cache
    recs = [json.loads(x) for x in (tmp_path / "session.jsonl").read_text().splitlines()]
    for rec, tokens in zip(recs, seen, strict=True):
        m = rec["metrics"]
        fed_back = m["output_tokens"] - (1 if m["finish_reason"] == "length" else 0)
        assert tokens == m["prompt_tokens"] + fed_back, (rec["metrics"], tokens)


def test_llama_server_text_says_what_is_assumed_or_unknown():
    assumed = KvLayout(30, 3, 90, 64, 64, cache_type_assumed=True)
    first, second = kv_lines(state_from_fill(1_234, 8_192, assumed))
    assert first == "KV 1,234 / 8,192 tok (15%) ▕██░░░░░░░░░░░░░░▏"
    assert second.startswith("27.1 MiB = 1,234 tok × 22.5 KiB (f16, 30 layers × 3 kv heads × 64)")
    assert "estimate: cache type assumed" in second
    _, unknown = kv_lines(state_from_fill(10, 2_048, None, "remote server: not readable"))
    assert unknown == "memory unknown: remote server: not readable"
    first, _ = kv_lines(state_from_fill(None, 2_048, SMOLLM2))
    assert "the server did not say" in first


def test_vllm_text_has_usage_and_blocks():
    first, second = kv_lines(state_from_vllm(0.125, {"num_gpu_blocks": "4096", "block_size": "16"}))
    assert first == "KV 12.5% of 4,096 blocks ▕██░░░░░░░░░░░░░░▏"
    assert second == "≈512 blocks used × 16 tok/block (estimate) · vLLM /metrics"


def test_a_narrow_panel_gets_the_short_shape():
    state = state_from_fill(112, 2_048, SMOLLM2)
    _, full = kv_lines(state)
    _, short = kv_lines(state, 62)
    assert len(full) > 62 and len(short) <= 62
    assert short == "2.5 MiB = 112 tok × 22.5 KiB (f16, 30L × 3 kv × 64)"
