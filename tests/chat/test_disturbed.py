"""The "disturbed: a build was compiling" mark is set exactly while a build ran during an
answer: from its send to its end, on the one clock every stamp is taken with.

The build is the real state file (tui/engines/files/build_state.py) written at the
moments each case needs, from the engine's own thread (the chat core's tap) while the
answer streams; a running build's process is a live process named as the builder is.
The engine is the synthetic one at an exact pace, so each answer lasts 0.3 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tui.core.events import TextChunk
from tui.core.session import SessionRecorder
from tui.engines.files.build_state import (
    BUILDER_MODULE,
    DISTURBED,
    BuildState,
    BuildWatch,
    boot_id,
    write_build_state,
)

PACED = (
    'default_engine = "s"\n[generation]\nmax_tokens = 30\ntemperature = 0.0\n'
    '[engines.s]\nkind = "synthetic"\noptions = { tokens_per_s = 100, ttft_ms = 5 }\n'
)


@pytest.fixture
def builder() -> Iterator[int]:
    """A live process /proc names as the builder: the pid a running build's state has."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", BUILDER_MODULE],
        stdin=subprocess.DEVNULL,
    )
    yield proc.pid
    proc.kill()
    proc.wait()


def build(pid: int, started_ns: int, ended_ns: int | None = None) -> BuildState:
    return BuildState(
        phase="compiling" if ended_ns is None else "done",
        pid=pid,
        what="llama-cpp-python 0.3.36",
        log="/v/build.log",
        started_ns=started_ns,
        updated_ns=ended_ns or started_ns,
        ended_ns=ended_ns,
        boot=boot_id(),
    )


class Turns:
    """A chat core on the paced engine, its build's state in ``dir``, and ``at_chunk``:
    what to do to that state when the answer's n-th text chunk is stamped."""

    def __init__(self, chat: Any, tmp: Path) -> None:
        self.dir = tmp / "build"
        self.at_chunk: dict[int, Callable[[], None]] = {}
        self.chunks = 0
        self.log = tmp / "s.jsonl"
        self.core, _ = chat(
            PACED,
            recorder=SessionRecorder(self.log),
            disturbance=BuildWatch(self.dir).disturbance,
            tap=self.tap,
        )

    def tap(self, slot: str, event: object) -> None:  # the engine's thread, as events come
        if isinstance(event, TextChunk):
            self.chunks += 1
            action = self.at_chunk.pop(self.chunks, None)
            if action is not None:
                action()

    def start(self, pid: int) -> None:
        write_build_state(self.dir, build(pid, time.perf_counter_ns()))

    def end(self) -> None:
        started = json.loads((self.dir / "state.json").read_text())["started_ns"]
        write_build_state(self.dir, build(0, started, time.perf_counter_ns()))

    async def answer(self) -> str | None:
        self.chunks = 0
        await self.core.run_turn(self.core.start_turn("count to thirty"))
        live = self.core.live["A"]
        assert live is not None and live.timeline.t_end_ns is not None
        assert self.chunks >= 25 and not self.at_chunk  # each action ran, mid-answer
        record = json.loads(self.log.read_text().splitlines()[-1])
        assert record["disturbed"] == live.disturbed  # the session log says the same
        return live.disturbed


async def test_no_build_no_mark(chat, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert await Turns(chat, tmp_path).answer() is None


async def test_a_build_running_throughout_marks_the_answer(chat, tmp_path, builder) -> None:  # type: ignore[no-untyped-def]
    turns = Turns(chat, tmp_path)
    turns.start(builder)
    assert await turns.answer() == DISTURBED


async def test_a_build_that_ended_before_the_send_does_not(chat, tmp_path, builder) -> None:  # type: ignore[no-untyped-def]
    turns = Turns(chat, tmp_path)
    turns.start(builder)
    turns.end()
    assert await turns.answer() is None


async def test_a_build_that_starts_mid_answer_marks_it(chat, tmp_path, builder) -> None:  # type: ignore[no-untyped-def]
    turns = Turns(chat, tmp_path)
    turns.at_chunk[15] = lambda: turns.start(builder)
    assert await turns.answer() == DISTURBED


async def test_a_build_that_starts_and_ends_inside_an_answer_marks_it(
    chat, tmp_path, builder
) -> None:  # type: ignore[no-untyped-def]
    turns = Turns(chat, tmp_path)
    turns.at_chunk[5] = lambda: turns.start(builder)
    turns.at_chunk[20] = turns.end
    assert await turns.answer() == DISTURBED


async def test_the_answer_after_the_build_ended_is_not_marked(chat, tmp_path, builder) -> None:  # type: ignore[no-untyped-def]
    turns = Turns(chat, tmp_path)
    turns.start(builder)
    assert await turns.answer() == DISTURBED
    turns.end()
    assert await turns.answer() is None
    lines = turns.log.read_text().splitlines()
    assert [json.loads(ln)["disturbed"] for ln in lines] == [DISTURBED, None]
