"""What the chat core does when something fails, without a screen: an engine that cannot
load, an engine that raises or ends its stream without a finish, a session log that
cannot be written. Each answer still ends (AnswerEnded, TurnEnded), the core is ready for
the next prompt, and the user is told why in one line.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing

import pytest

from tui.chat.events import AnswerEnded, EngineStateChanged, Notice, TurnEnded
from tui.core.events import Finished, StreamEvent, TextChunk
from tui.core.session import SessionRecorder
from tui.engines.inprocess.synthetic import SyntheticEngine
from tui.engines.kinds import EngineKind, engine_kind, register, unregister


class RaisingEngine(SyntheticEngine):
    """The synthetic engine, raising (as an engine bug would) after its first token."""

    kind = "raising"

    async def events(self, request, cancel=None) -> AsyncIterator[StreamEvent]:  # type: ignore[no-untyped-def, override]
        async with aclosing(super().events(request, cancel)) as events:
            async for event in events:
                yield event
                if isinstance(event, TextChunk):
                    raise RuntimeError("engine bug")


class UnfinishedEngine(SyntheticEngine):
    """The synthetic engine, its stream ending without Finished."""

    kind = "unfinished"

    async def events(self, request, cancel=None) -> AsyncIterator[StreamEvent]:  # type: ignore[no-untyped-def, override]
        async with aclosing(super().events(request, cancel)) as events:
            async for event in events:
                if isinstance(event, Finished):
                    return
                yield event


@pytest.fixture
def faulty_kinds() -> Iterator[None]:
    options = engine_kind("synthetic").options
    for cls in (RaisingEngine, UnfinishedEngine):
        register(
            EngineKind(cls.kind, f"{__name__}:{cls.__name__}", options=options, in_process=True)
        )
    yield
    for cls in (RaisingEngine, UnfinishedEngine):
        unregister(cls.kind)


async def test_an_engine_that_cannot_load_ends_the_answer_with_why(chat, two, tmp_path):
    log = tmp_path / "s.jsonl"
    text = two.replace("ttft_ms = 5 }", 'ttft_ms = 5, fail_load = "no such model" }', 1)
    core, events = chat(text, recorder=SessionRecorder(log))
    for _ in range(2):  # the next prompt tries the load again
        m = (await core.run_turn(core.start_turn("q")))["A"]
        assert m.error == "engine s1 is not available: no such model"
        assert m.ttft_ms is None and not core.busy
    live = core.live["A"]
    assert live is not None and live.timeline.error_kind == "load"
    states = [(e.state, e.detail) for e in events if isinstance(e, EngineStateChanged)]
    assert states == [("loading", ""), ("error", "no such model")] * 2
    assert [type(e) for e in events if not isinstance(e, EngineStateChanged)] == [
        *(AnswerEnded, TurnEnded) * 2
    ]
    assert core.messages["A"] == [] and core.history["A"]["ttft"].snapshot() == []
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["error"] for r in records] == [m.error] * 2  # the failure is in the log too
    core.use_engine("A", "s2")  # another engine works at once
    assert (await core.run_turn(core.start_turn("q")))["A"].output_tokens == 8


async def test_an_engine_that_raises_ends_its_answer_keeping_what_came(chat, faulty_kinds):
    text = (
        'default_engine = "r"\n[generation]\nmax_tokens = 8\n'
        '[engines.r]\nkind = "raising"\noptions = { tokens_per_s = 400, ttft_ms = 5 }\n'
    )
    core, events = chat(text)
    m = (await core.run_turn(core.start_turn("q")))["A"]
    live = core.live["A"]
    assert live is not None and live.timeline.error_kind == "engine"
    assert m.error == "RuntimeError: engine bug"
    assert m.output_tokens == 1 and live.timeline.text  # the token before the fault kept
    assert core.messages["A"][-1] == {"role": "assistant", "content": live.timeline.text}
    assert isinstance(events[-1], TurnEnded) and not core.busy


async def test_a_stream_that_ends_without_a_finish_is_a_protocol_failure(chat, faulty_kinds):
    text = (
        'default_engine = "u"\n[generation]\nmax_tokens = 8\n'
        '[engines.u]\nkind = "unfinished"\noptions = { tokens_per_s = 400, ttft_ms = 5 }\n'
    )
    core, _ = chat(text)
    m = (await core.run_turn(core.start_turn("q")))["A"]
    live = core.live["A"]
    assert live is not None and live.timeline.error_kind == "protocol"
    assert m.error == "the stream ended without a finish"
    assert m.output_tokens == 8  # every token it sent is counted


async def test_a_session_log_that_cannot_be_written_is_said_once(chat, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    core, events = chat(recorder=SessionRecorder(blocker / "s.jsonl"))
    for _ in range(3):
        m = (await core.run_turn(core.start_turn("q")))["A"]
        assert m.error is None and m.output_tokens == 8  # the answers themselves are fine
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and notices[0].severity == "error"
    assert "session log not written" in notices[0].text and str(blocker) in notices[0].text
