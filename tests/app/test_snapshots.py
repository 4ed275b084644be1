"""One snapshot per screen and state, at a fixed terminal size, app built by the factory.

The app runs with the real llama.cpp engine loaded. Measured numbers change from run to
run, so each snapshot fills the panels from one fixed RequestMetrics and one fixed
hardware sample (written out below): the snapshot checks layout and labels; the Pilot
tests in test_flows.py check the measured behaviour.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.app.app_support import LOCAL, SYNTH, gen
from tui.app.format import summary_line
from tui.app.messages import KvUpdated, TelemetrySampled
from tui.app.widgets.ab_table import ABTable
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.prompt import PromptInput
from tui.core.events import REASONING, TOOL
from tui.core.kv import KvLayout, state_from_fill
from tui.core.metrics import RequestMetrics
from tui.engines.placement import SEQUENTIAL, ABPlan
from tui.telemetry.devices.nvml import NvmlSample
from tui.telemetry.sampler import TelemetrySample
from tui.telemetry.system import SystemSample

# private_paths: the same pictures with the Textual fallback too (docs/testing.md)
pytestmark = [pytest.mark.engine, pytest.mark.private_paths]

ANSWER = (
    "**Prefill** processes the whole prompt in one pass; **decode** then produces one "
    "token at a time.\n\n- prefill is compute-bound\n- decode is memory-bound\n"
)
FIXED = RequestMetrics(
    ttft_ms=182.4,
    ttfr_ms=182.4,
    e2e_ms=912.0,
    itl_token_ms=[11.0, 11.2, 10.9],
    tpot_ms=11.1,
    decode_tps=90.1,
    prefill_tps=176.0,
    prefill_tps_source="engine",
    prompt_tokens=32,
    output_tokens=66,
    output_tokens_source="usage",
    content_chunks=66,
    prefill_ms=181.8,
    decode_ms=721.4,
    engine_prefill_ms=181.8,
    engine_decode_tps=90.4,
    ttft_minus_engine_prefill_ms=0.6,
    decode_tps_vs_engine=0.997,
    finish_reason="stop",
)
THOUGHT = (
    "The user asks which phase is bound by memory. Prefill reads the prompt in one pass "
    "and is compute-bound; decode streams the weights once per token."
)
REASONED = RequestMetrics(
    **{
        **FIXED.__dict__,
        "output_tokens": 186,
        "ttfo_ms": 3410.0,
        "thinking_ms": 3228.0,
        "reasoning_tokens": 120,
        "reasoning_tokens_source": "usage",
        "answer_tokens": 66,
        "reasoning_tps": 37.2,
        "answer_tps": 90.1,
    }
)
SMOLLM2 = KvLayout(n_layers=30, n_kv_heads=3, kv_heads_total=90, head_dim_k=64, head_dim_v=64)
SAMPLE = TelemetrySample(
    0.0,
    SystemSample(
        cpu_percent=63.0,
        per_core=[71.0, 55.0],
        ram_used=3 * 2**30,
        ram_total=24 * 2**30,
        rss_bytes=240 * 2**20,
        rss_pid=4242,
    ),
    NvmlSample("absent", "no NVIDIA GPU (NVML Shared Library Not Found)"),
)


async def _settle(pilot, *, answer: bool = True, slots=("A",)) -> None:  # type: ignore[no-untyped-def]
    app = pilot.app
    chat = app.chat
    deadline = time.monotonic() + 60
    while chat.query_one(EngineBar).plain().count("ready") < len(slots):
        assert time.monotonic() < deadline, "engine did not load"
        await asyncio.sleep(0.05)
    app.clear_notifications()
    chat.query_one(PromptInput).cursor_blink = False
    for slot in slots:
        chat.query_one(EngineBar).set_state(slot, "ready", "loaded in 300 ms")
        if answer:
            conv = chat.query_one(f"#conv-{slot}", Conversation)
            turn = await conv.add_turn(
                "What is the difference between prefill and decode?",
                chat.slot_engine[slot],
                f"r-{slot}",
            )
            await turn.append(ANSWER)
            await turn.finish(summary_line(FIXED))
            app.core.push_history(slot, FIXED)
    if answer:
        for slot in slots:
            chat.view.show_history(slot)
        if len(slots) == 2:
            chat.view.show_ratios({})
            chat.query_one(ABTable).add_turn(1, FIXED, FIXED, ABPlan(SEQUENTIAL, "shared machine"))
    app.hardware.sampler.cpu.extend([20.0, 40.0, 63.0])
    chat.post_message(TelemetrySampled(SAMPLE))
    if answer:  # slot A's KV cache as in-process llama.cpp reports it (SmolLM2's layout)
        chat.post_message(KvUpdated(chat.slot_engine["A"], state_from_fill(98, 2048, SMOLLM2)))
    await pilot.pause(0.3)


def test_chat_ready_empty(snap_compare, make_config, build_app):
    app = build_app(make_config(gen() + LOCAL))
    assert snap_compare(app, terminal_size=(120, 36), run_before=lambda p: _settle(p, answer=False))


def test_chat_after_answer_wide(snap_compare, make_config, build_app):
    app = build_app(make_config(gen() + LOCAL))
    assert snap_compare(app, terminal_size=(120, 36), run_before=_settle)


def test_chat_after_answer_80x24(snap_compare, make_config, build_app):
    app = build_app(make_config(gen() + LOCAL))
    assert snap_compare(app, terminal_size=(80, 24), run_before=_settle)


@pytest.mark.parametrize("size", [(100, 30), (120, 40), (200, 50)])
def test_chat_after_answer_at_each_size(snap_compare, make_config, build_app, size):
    """The layouts decided for the usual sizes (80x24 above): below 110 columns or 30
    rows the sparkline block sits above the chat; from there the panels are beside it."""
    app = build_app(make_config(gen() + LOCAL))
    assert snap_compare(app, terminal_size=size, run_before=_settle)


def test_ab_mode_80x24(snap_compare, make_config, build_app):
    app = build_app(make_config(gen() + LOCAL + SYNTH))

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("ctrl+o")
        await _settle(pilot, slots=("A", "B"))

    assert snap_compare(app, terminal_size=(80, 24), run_before=run)


def test_panels_view_80x24(snap_compare, make_config, build_app):
    app = build_app(make_config(gen() + LOCAL))

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settle(pilot)
        await pilot.press("f2")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run)


def test_ab_mode(snap_compare, make_config, build_app):
    app = build_app(make_config(gen() + LOCAL + SYNTH))

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("ctrl+o")
        await _settle(pilot, slots=("A", "B"))

    assert snap_compare(app, terminal_size=(120, 36), run_before=run)


def test_engine_load_error(snap_compare, make_config, build_app):
    cfg = make_config(
        'default_engine = "gone"\n' + gen() + '[engines.gone]\nkind = "llamacpp"\n'
        'model = "missing-model.gguf"\n'
    )
    app = build_app(cfg)

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 30
        while "error" not in pilot.app.chat.query_one(EngineBar).plain():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        pilot.app.chat.query_one(PromptInput).cursor_blink = False
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run)


def test_light_theme(snap_compare, make_config, build_app):
    app = build_app(make_config('[ui]\ntheme = "infertop-light"\n' + gen() + LOCAL))
    assert snap_compare(app, terminal_size=(120, 36), run_before=_settle)


def test_reasoning_turn_80x24(snap_compare, make_config, build_app):
    """A reasoning model's answer: its reasoning folded above it, a tool call, TTFO
    beside TTFT in the summary and the sparkline block, the key that unfolds it."""
    app = build_app(make_config(gen() + LOCAL))

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settle(pilot, answer=False)
        chat = pilot.app.chat
        conv = chat.query_one("#conv-A", Conversation)
        turn = await conv.add_turn("Which phase is memory-bound?", "local", "r-A")
        await turn.append(THOUGHT, REASONING)
        turn.show_thought(REASONED.thinking_ms, REASONED.reasoning_tokens, False)
        await turn.append("**Decode**: each token streams every weight from memory.")
        await turn.append('lookup({"topic": "decode"})', TOOL)
        await turn.finish(summary_line(REASONED))
        pilot.app.core.push_history("A", REASONED)
        chat.view.show_history("A")
        chat.view.note_fold(turn)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run)


def test_cancelled_and_failed_answers(snap_compare, make_config, build_app):
    app = build_app(make_config(gen() + LOCAL))

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settle(pilot, answer=False)
        conv = pilot.app.chat.query_one("#conv-A", Conversation)
        cancelled = RequestMetrics(**{**FIXED.__dict__, "finish_reason": "cancelled"})
        failed = RequestMetrics(
            **{**FIXED.__dict__, "finish_reason": "error", "error": "server went away"}
        )
        for i, (m, state) in enumerate([(cancelled, "cancelled"), (failed, "error")]):
            turn = await conv.add_turn(f"Question {i + 1}?", "local", f"r{i}")
            await turn.append("A partial answer that was cut")
            await turn.finish(summary_line(m), state)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run)
