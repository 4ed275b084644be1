"""The chat core without a screen: turns, A/B, cancel, failures, history, the record.

Engines are the in-process synthetic kind (exact pacing, failures on demand); the core
runs on the test's event loop exactly as it runs on the TUI's.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tui.chat.core import ChatCore, Refused
from tui.chat.events import AnswerEnded, AnswerWaiting, EngineStateChanged, TurnEnded
from tui.config import parse_config
from tui.core.session import SessionRecorder


def config(text: str):  # type: ignore[no-untyped-def]
    return parse_config(text, Path("t.toml"))


TWO = (
    'default_engine = "s1"\n[generation]\nmax_tokens = 8\ntemperature = 0.0\n'
    '[engines.s1]\nkind = "synthetic"\noptions = { tokens_per_s = 400, ttft_ms = 5 }\n'
    '[engines.s2]\nkind = "synthetic"\noptions = { tokens_per_s = 400, ttft_ms = 5 }\n'
)


def make(text: str = TWO, **kw):  # type: ignore[no-untyped-def]
    events: list[object] = []
    return ChatCore(config(text), events.append, **kw), events


async def test_a_turn_streams_records_and_remembers(tmp_path):
    recorder = SessionRecorder(tmp_path / "s.jsonl")
    taps: list[str] = []
    core, events = make(recorder=recorder, tap=lambda slot, ev: taps.append(slot))
    try:
        results = await core.run_turn(core.start_turn("hello"))
        m = results["A"]
        assert m.output_tokens == 8 and m.ttft_ms is not None and not core.busy
        kinds = [type(e) for e in events]
        assert kinds[0] is EngineStateChanged and kinds[-2:] == [AnswerEnded, TurnEnded]
        states = [e.state for e in events if isinstance(e, EngineStateChanged)]
        assert states == ["loading", "ready", "generating", "ready"]
        live = core.live["A"]
        assert live is not None and live.timeline.text
        assert len(taps) == live.events and set(taps) == {"A"}  # every event, in the tap
        # the answer is the next turn's context, and a point in each history window
        assert core.messages["A"][-1] == {"role": "assistant", "content": live.timeline.text}
        assert core.history["A"]["ttft"].snapshot() == [m.ttft_ms]
        assert core.last_metrics["A"] is m
        rec = json.loads((tmp_path / "s.jsonl").read_text())
        assert rec["engine"] == "s1" and rec["slot"] == "A" and rec["text"] == live.timeline.text
        second = core.start_turn("again")["A"]
        assert [x["role"] for x in second.messages] == ["user", "assistant", "user"]
        await core.run_turn({"A": second})
    finally:
        await core.close()


async def test_ab_on_one_machine_runs_in_turn_and_says_who_waits():
    core, events = make()
    try:
        assert core.toggle_ab() and core.slot_engine == {"A": "s1", "B": "s2"}
        assert core.ab_plan().label == "sequential (shared machine)"
        for _ in range(2):
            await core.run_turn(core.start_turn("q"))
        ended = [e.slot for e in events if isinstance(e, AnswerEnded)]
        waiting = [(e.slot, e.first) for e in events if isinstance(e, AnswerWaiting)]
        assert ended == ["A", "B", "B", "A"]  # turn 1: A first; turn 2: B first
        assert waiting == [("B", "A"), ("A", "B")]
        turns = [e for e in events if isinstance(e, TurnEnded)]
        assert [set(t.results) for t in turns] == [{"A", "B"}, {"A", "B"}]
        assert all(t.plan is not None and t.plan.schedule == "sequential" for t in turns)
    finally:
        await core.close()


async def test_a_failure_keeps_the_partial_answer_and_cancel_ends_a_stream():
    flaky = TWO.replace("ttft_ms = 5 }", "ttft_ms = 5, fail_after = 3 }", 1)
    core, events = make(flaky.replace("max_tokens = 8", "max_tokens = 400"))
    try:
        m = (await core.run_turn(core.start_turn("q")))["A"]
        live = core.live["A"]
        assert m.error and live is not None and live.timeline.text  # what came is kept
        assert len(live.timeline.content_chunks) == 3
        core.use_engine("A", "s2")
        requests = core.start_turn("a long one")
        task = asyncio.ensure_future(core.run_turn(requests))
        rid = requests["A"].request_id
        while (live := core.live["A"]) is None or live.request_id != rid or not live.drain():
            await asyncio.sleep(0.01)
        assert core.cancel()
        m = (await task)["A"]
        assert m.finish_reason == "cancelled" and not core.busy and not core.cancel()
    finally:
        await core.close()


async def test_what_the_core_refuses():
    core, _ = make()
    with pytest.raises(Refused, match="empty"):
        core.start_turn("  ")
    with pytest.raises(Refused, match="no engine named 'x'"):
        core.use_engine("A", "x")
    requests = core.start_turn("q")
    with pytest.raises(Refused, match="still answering"):
        core.start_turn("q")
    for refused in (lambda: core.use_engine("A", "s2"), core.toggle_ab, core.clear):
        with pytest.raises(Refused, match="streaming"):
            refused()
    assert core.cancel()  # Esc before the answer started: it ends as cancelled
    m = (await core.run_turn(requests))["A"]
    assert (
        m.error == "cancelled before it started"
        and core.live["A"].timeline.error_kind == "cancelled"
    )
    assert core.use_engine("A", "s2") == "s1" and core.use_engine("A", "s2") == "s2"
    assert core.release("s2") is None  # still slot A's
    await core.close()
    one, _ = make(TWO.split("[engines.s2]")[0])
    with pytest.raises(Refused, match="A/B needs two engines"):
        one.toggle_ab()
    with pytest.raises(Refused, match="only one engine"):
        one.next_engine()
