"""One exchange's lifecycle (tui/proxy/exchange.py, issue 49): made with no I/O, then
every transition of its table walked — sent now from the read callback or sent by its
task, answered, and each way it ends (done, unanswered, cut short, failed, cancelled:
before its task ran too, which is a state, not a done-callback) — with the real pool,
book and forwarding against a scripted upstream; and no transition off the table."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from tests.support.scripted_upstream import CLOSE, HANG, ScriptedUpstream
from tui.proxy.exchange import (
    ENDED,
    NEXT,
    ClientRequest,
    Exchange,
    ExchangeState,
    Forwarding,
)
from tui.proxy.forward import forward
from tui.proxy.peer_process import PeerProcess
from tui.proxy.server import Proxy, ProxyConfig
from tui.transport.http_head import parse_request_head

S = ExchangeState
ANSWER = b'{"choices":[{"message":{"content":"hi"}}],"usage":{"completion_tokens":1}}'
WHOLE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(ANSWER),
    ANSWER,
)
BEGUN = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"


class Client:
    """The client side an exchange writes to (tui/proxy/exchange.py's Client)."""

    def __init__(self, fail_writes: bool = False) -> None:
        self.peer = "127.0.0.1:5000"
        self.closed = self.paused = False
        self.upstream = None
        self.out = b""
        self.fail_writes = fail_writes

    def write(self, data: bytes) -> None:
        if self.fail_writes:
            raise RuntimeError("a bug in writing")
        self.out += data

    def close(self) -> None:
        self.closed = True

    def peer_process(self) -> PeerProcess:
        return PeerProcess()


@pytest.fixture
def walked(monkeypatch) -> Iterator[list[tuple[S, S]]]:  # type: ignore[no-untyped-def]
    """Every transition any exchange takes, in order."""
    seen: list[tuple[S, S]] = []
    to = Exchange._to

    def recorded(self: Exchange, state: S) -> None:
        before = self.state
        to(self, state)
        seen.append((before, state))

    monkeypatch.setattr(Exchange, "_to", recorded)
    yield seen


def _upstream(*script: tuple[float, bytes]) -> ScriptedUpstream:
    return ScriptedUpstream(lambda _req: list(script))


_POOLS: list[Forwarding] = []


def _forwarding(url: str) -> Forwarding:
    fw = Proxy(ProxyConfig(upstream=url, listen_port=0)).forwarding
    _POOLS.append(fw)
    return fw


@pytest.fixture(autouse=True)
async def _close_pools() -> object:
    yield None
    while _POOLS:
        _POOLS.pop().pool.close()  # (on the test's loop: its kept-alive connections)


def _request() -> ClientRequest:
    body = b'{"model":"m","messages":[]}'
    raw = b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\nContent-Length: %d" % len(body)
    return ClientRequest(parse_request_head(raw), body, 0)


async def _idle_connection(fw: Forwarding) -> None:
    fw.pool.release(await fw.pool.connect())  # a kept-alive connection, idle


async def _until(predicate, seconds: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(seconds / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


def _booked(fw: Forwarding) -> str:
    (rec,) = fw.book.recent
    return str(rec.state)


async def test_sent_now_answered_done(walked) -> None:  # type: ignore[no-untyped-def]
    up = _upstream((0, WHOLE))
    try:
        fw = _forwarding(up.url)
        await _idle_connection(fw)
        ex = Exchange(fw, Client(), _request())
        assert ex.state is S.NEW and not up.exchanges  # the constructor sent nothing
        ex.start()
        assert ex.state is S.SENT_NOW and ex.sending is not None
        await _until(lambda: len(up.exchanges) == 1)  # sent from the read callback
        assert await forward(ex) is True
        assert ex.client.out.endswith(ANSWER) and _booked(fw) == "done"
        assert walked == [(S.NEW, S.SENT_NOW), (S.SENT_NOW, S.RUNNING), (S.RUNNING, S.ANSWERED),
                          (S.ANSWERED, S.DONE)]  # fmt: skip
        with pytest.raises(RuntimeError, match="cannot go from done to running"):
            ex.run()  # off the table
        ex.cancel()  # (ended: nothing)
        assert ex.state is S.DONE
    finally:
        up.stop()


async def test_run_by_its_task_answered_cut_short(walked) -> None:  # type: ignore[no-untyped-def]
    up = _upstream((0, BEGUN), (0.05, CLOSE))
    try:
        fw = _forwarding(up.url)
        ex = Exchange(fw, Client(), _request())
        ex.start()  # no idle connection: its task sends it
        assert ex.state is S.NEW
        assert await forward(ex) is False and ex.client.closed
        assert walked == [(S.NEW, S.RUNNING), (S.RUNNING, S.ANSWERED), (S.ANSWERED, S.CUT)]
        assert _booked(fw) == "failed"
    finally:
        up.stop()


async def test_unanswered(walked) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # (nothing listens)
    fw = _forwarding(dead)
    ex = Exchange(fw, Client(), _request())
    ex.start()
    assert await forward(ex) is True  # the proxy answered itself
    assert ex.client.out.startswith(b"HTTP/1.1 502 ") and _booked(fw) == "failed"
    assert walked == [(S.NEW, S.RUNNING), (S.RUNNING, S.UNANSWERED)]


async def test_failed(walked) -> None:  # type: ignore[no-untyped-def]
    up = _upstream((0, WHOLE))
    try:
        fw = _forwarding(up.url)
        ex = Exchange(fw, Client(fail_writes=True), _request())
        ex.start()
        with pytest.raises(RuntimeError, match="a bug"):
            await forward(ex)
        assert walked == [(S.NEW, S.RUNNING), (S.RUNNING, S.ANSWERED), (S.ANSWERED, S.FAILED)]
        assert _booked(fw) == "failed"  # (its record: "the proxy could not finish")
    finally:
        up.stop()


async def test_cancelled_before_its_task_ran(walked) -> None:  # type: ignore[no-untyped-def]
    """Sent now, then its client gone in the same loop turn: its task never runs, and
    the exchange ends as cancelled all the same — the upstream connection it was sent on
    closed, the request booked."""
    up = _upstream((0, HANG))
    try:
        fw = _forwarding(up.url)
        await _idle_connection(fw)
        ex = Exchange(fw, Client(), _request())
        ex.start()
        conn = ex.sending.conn if ex.sending is not None else None
        task = asyncio.get_running_loop().create_task(forward(ex))
        ex.cancel()  # (ClientConnection.connection_lost: the exchange, then its task)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert conn is not None and conn.closed
        assert walked == [(S.NEW, S.SENT_NOW), (S.SENT_NOW, S.CANCELLED)]
        assert _booked(fw) == "cancelled"
        ex2 = Exchange(fw, Client(), _request())
        ex2.start()  # nothing idle now: not sent
        ex2.cancel()
        assert walked[-1] == (S.NEW, S.CANCELLED)
    finally:
        up.stop()


async def test_cancelled_while_running_and_answered(walked) -> None:  # type: ignore[no-untyped-def]
    for script, reached in (((0, HANG),), S.RUNNING), (((0, BEGUN), (0, HANG)), S.ANSWERED):
        up = _upstream(*script)
        try:
            fw = _forwarding(up.url)
            ex = Exchange(fw, Client(), _request())
            ex.start()
            task = asyncio.get_running_loop().create_task(forward(ex))
            await _until(lambda ex=ex, reached=reached: ex.state is reached)
            ex.cancel()  # its task runs: the task's cancellation ends it
            assert ex.state is reached
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert walked[-1] == (reached, S.CANCELLED)
        finally:
            up.stop()


def test_the_table() -> None:
    """Every state is reached from NEW, every one not ended has a way on, and the ended
    ones none."""
    reached, todo = {S.NEW}, [S.NEW]
    while todo:
        for nxt in NEXT.get(todo.pop(), frozenset()):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    assert reached == set(S)
    assert set(NEXT) == set(S) - ENDED and not ENDED & set(NEXT)
