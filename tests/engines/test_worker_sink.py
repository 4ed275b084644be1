"""The worker's frame sink: the first token and the end leave at once, tokens between in
frames at most every GATHER_S, every event once and in order, and a stall does not hold
what waits (the loop's timer flushes it)."""

from __future__ import annotations

from typing import Any

import pytest

from tui.core.events import ContextFill, Failed, Finished, RequestSent, StampSource, TextChunk
from tui.engines.inprocess import worker_main
from tui.engines.inprocess.worker_main import GATHER_S, _FrameSink


class Server:
    """Records the frames a sink sends (what WorkerServer.send writes to the socket)."""

    def __init__(self) -> None:
        self.frames: list[tuple[Any, ...]] = []

    def send(self, message: tuple[Any, ...]) -> None:
        self.frames.append(message)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(worker_main.time, "monotonic", c)
    return c


def chunk(i: int) -> TextChunk:
    return TextChunk(1000 + i, f"t{i}", 1)


def test_first_token_and_end_at_once_tokens_between_gathered(clock: Clock) -> None:
    server = Server()
    sink = _FrameSink(server, 7)  # type: ignore[arg-type]
    sink.put(RequestSent(1))  # the parent stamps its own
    sink.put(StampSource(2, "llama.cpp's generation thread"))
    sink.put(ContextFill(3, 42, 2048))
    assert len(server.frames) == 2  # before the first token, nothing waits
    sink.put(chunk(0))
    assert [e for f in server.frames for e in f[2]][-1] == chunk(0)  # the first token: at once
    step = GATHER_S / 7
    for i in range(1, 6):  # 5 tokens GATHER_S / 7 apart: under GATHER_S since the last frame
        clock.now += step
        sink.put(chunk(i))
    assert len(server.frames) == 3
    clock.now += 2.5 * step  # just over GATHER_S since the first token's frame
    sink.put(chunk(6))
    assert len(server.frames) == 4 and server.frames[-1][2] == [chunk(i) for i in range(1, 7)]
    clock.now += 0.001
    sink.put(chunk(7))
    sink.put(Finished(2000, "length"))  # the end: at once, with what waited
    assert server.frames[-1][2] == [chunk(7), Finished(2000, "length")]
    sink.put(chunk(8))  # after the end: dropped
    events = [e for f in server.frames for e in f[2]]
    assert all(f[:2] == ("events", 7) for f in server.frames)
    assert events[0] == StampSource(
        2, "llama.cpp's generation thread (in infertop's engine worker process)"
    )
    assert events[1:] == [
        ContextFill(3, 42, 2048),
        *[chunk(i) for i in range(8)],
        Finished(2000, "length"),
    ]


def test_the_timer_sends_what_waits_after_a_stall(clock: Clock) -> None:
    server = Server()
    sink = _FrameSink(server, 1)  # type: ignore[arg-type]
    sink.put(chunk(0))
    clock.now += GATHER_S / 4
    sink.put(chunk(1))  # waits: under GATHER_S since the last frame
    sink.flush()
    assert len(server.frames) == 1  # not yet GATHER_S
    clock.now += GATHER_S
    sink.flush()  # the stream stalled: the timer sends it
    assert server.frames[-1][2] == [chunk(1)]
    sink.flush()
    assert len(server.frames) == 2  # nothing waits: no empty frame


def test_a_failure_leaves_at_once(clock: Clock) -> None:
    server = Server()
    sink = _FrameSink(server, 1)  # type: ignore[arg-type]
    sink.put(chunk(0))
    clock.now += 0.001
    sink.put(chunk(1))
    sink.put(Failed(5, "llama.cpp failed", "engine"))
    assert server.frames[-1][2] == [chunk(1), Failed(5, "llama.cpp failed", "engine")]
    assert sink.ended
