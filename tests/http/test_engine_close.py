"""Closing an HTTP engine closes its sockets: when close() returns, and for a stream that
was still running when it closed (found by the load soak, tests/bench/test_soak.py)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from tests.support.soak import PaceProcess, SoakConfig, open_fds
from tui.core.events import Finished
from tui.engines.base import CancelToken, EngineSpec, GenerationRequest
from tui.engines.registry import create_engine
from tui.transport.http1 import Http1Pool
from tui.transport.http_io import HttpTimeouts
from tui.transport.reader_loop import HttpReader
from tui.transport.tcp import StampedConn


@pytest.fixture(scope="module")
def pace_url() -> Iterator[str]:
    """A pace server in its own process: every socket in ours is the client's."""
    server = PaceProcess(SoakConfig(streams=8, interval_ms=10, tokens=20))
    try:
        yield server.url
    finally:
        server.stop()


def sockets() -> set[str]:
    return {target for target in open_fds().values() if target.startswith("socket:")}


async def answer(engine, events: list) -> None:  # type: ignore[no-untyped-def]
    req = GenerationRequest.from_prompt("hello", max_tokens=20)
    await engine.stream_into(req, CancelToken(), events.append)


async def test_a_stream_running_when_the_engine_closed_closes_its_socket(pace_url: str) -> None:
    HttpReader.shared()
    before = sockets()
    engine = create_engine(EngineSpec(name="p", kind="openai", url=pace_url, model="pace"))
    await engine.load()
    events: list = []
    task = asyncio.create_task(answer(engine, events))
    await asyncio.sleep(0.05)  # mid-answer
    await engine.close()
    await task  # the answer still runs to its end, then gives its connection back
    assert isinstance(events[-1], Finished)
    await HttpReader.shared().call(asyncio.sleep(0))  # the reader loop has settled
    assert sockets() - before == set()


async def test_close_returns_once_the_idle_sockets_are_closed(pace_url: str) -> None:
    HttpReader.shared()
    before = sockets()
    engine = create_engine(EngineSpec(name="p", kind="openai", url=pace_url, model="pace"))
    await engine.load()
    await asyncio.gather(*(answer(engine, []) for _ in range(4)))
    assert len(sockets() - before) >= 4  # kept alive in the pool
    assert engine._client is None  # type: ignore[attr-defined]  # plain http: no httpx client
    pool = engine._pool  # type: ignore[attr-defined]
    real_aclose = pool.aclose

    async def aclose_then_busy() -> None:
        await real_aclose()
        # the reader loop turns busy just after telling close() (another stream's work,
        # a slow callback): two hops, so the sleep runs after the caller is woken
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, time.sleep, 0.3)

    pool.aclose = aclose_then_busy
    await engine.close()
    assert sockets() - before == set()


async def test_a_connection_given_back_to_a_closed_pool_is_closed() -> None:
    """The pool under every plain-http engine (OpenAI-compatible, llama-server, vLLM,
    Ollama): close() while a response streams, then the response ends."""
    loop = asyncio.get_running_loop()
    a, b = socket.socketpair()
    pool = Http1Pool({}, HttpTimeouts(5.0, 5.0, 5.0))
    conn = StampedConn(loop, a)
    pool.close()
    pool.put(("127.0.0.1", 1), conn)
    assert conn.closed and a.fileno() == -1
    b.close()
