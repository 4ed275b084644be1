"""The chat core's A/B turns without a screen: who runs when, and what a cancel or a
failure on one side does to the other.

Engines are the in-process synthetic kind (tests/chat/conftest.py); the core runs on the
test's event loop as it runs on the TUI's.
"""

from __future__ import annotations

import asyncio

import pytest

from tui.chat.events import AnswerEnded, AnswerWaiting, EngineStateChanged, TurnEnded
from tui.engines.placement import CONCURRENT, SEQUENTIAL


@pytest.fixture
def long(two: str) -> str:
    """Answers long enough (100 tokens, ~0.5 s) that the other side's start falls well
    inside them."""
    return two.replace("max_tokens = 8", "max_tokens = 100").replace("400", "200")


def starts_and_ends(events: list[object]) -> list[str]:
    """'gen A', 'end B', ...: each side starting to generate and ending, in order."""
    out = []
    for e in events:
        if isinstance(e, EngineStateChanged) and e.state == "generating":
            out.append(f"gen {e.slot}")
        elif isinstance(e, AnswerEnded):
            out.append(f"end {e.slot}")
    return out


async def test_concurrent_ab_runs_both_answers_at_once_and_nobody_waits(chat, long):
    core, events = chat(
        long.replace("[generation]", '[ui]\nab_schedule = "concurrent"\n[generation]')
    )
    core.toggle_ab()
    plan = core.ab_plan()
    assert plan.schedule == CONCURRENT and "engines compete" in plan.why  # and says so
    results = await core.run_turn(core.start_turn("q"))
    assert set(results) == {"A", "B"} and all(m.output_tokens == 100 for m in results.values())
    order = starts_and_ends(events)
    assert sorted(order[:2]) == ["gen A", "gen B"]  # both started before either ended
    assert not [e for e in events if isinstance(e, AnswerWaiting)]
    (turn,) = [e for e in events if isinstance(e, TurnEnded)]
    assert turn.plan is not None and turn.plan.schedule == CONCURRENT


async def test_sequential_ab_starts_the_second_answer_after_the_first_ends(chat, long):
    core, events = chat(long)
    core.toggle_ab()
    assert core.ab_plan().schedule == SEQUENTIAL
    await core.run_turn(core.start_turn("q"))
    await core.run_turn(core.start_turn("q"))
    assert starts_and_ends(events) == [
        *("gen A", "end A", "gen B", "end B"),  # turn 1: A first
        *("gen B", "end B", "gen A", "end A"),  # turn 2: B first
    ]
    # each side keeps its own conversation: two exchanges, then the next prompt
    for slot in ("A", "B"):
        roles = [m["role"] for m in core.request(slot, "x").messages]
        assert roles == ["user", "assistant", "user", "assistant", "user"]


async def test_cancel_in_a_sequential_turn_ends_the_running_answer_and_the_waiting_one(chat, long):
    core, events = chat(long)
    core.toggle_ab()
    requests = core.start_turn("q")
    task = asyncio.ensure_future(core.run_turn(requests))
    rid = requests["A"].request_id
    while (live := core.live["A"]) is None or live.request_id != rid or not live.drain():
        await asyncio.sleep(0.01)
    assert core.cancel()
    results = await task
    assert results["A"].finish_reason == "cancelled"
    assert results["A"].output_tokens is not None and results["A"].output_tokens < 100
    b = core.live["B"]
    assert b is not None and b.timeline.error_kind == "cancelled"
    assert results["B"].error == "cancelled before it started"
    assert "gen B" not in starts_and_ends(events)  # B's engine was never asked
    assert core.messages["B"] == []  # nothing came: nothing joins its conversation
    assert core.messages["A"][-1]["content"] == core.live["A"].timeline.text  # what came
    assert not core.busy


async def test_a_failure_on_one_side_leaves_the_other_answer_whole(chat, long):
    core, events = chat(long.replace("ttft_ms = 5 }", "ttft_ms = 5, fail_after = 3 }", 1))
    core.toggle_ab()  # A: s1, which fails after 3 tokens; B: s2
    results = await core.run_turn(core.start_turn("q"))
    assert results["A"].error and results["A"].output_tokens == 3
    assert results["B"].error is None and results["B"].output_tokens == 100
    states = [(e.slot, e.state) for e in events if isinstance(e, EngineStateChanged)]
    assert ("A", "ready") in states[states.index(("A", "generating")) :]  # still usable
    assert core.history["A"]["ttft"].snapshot() and core.history["B"]["ttft"].snapshot()
