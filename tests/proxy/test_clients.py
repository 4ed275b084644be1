"""Clients as the proxy meets them: one that goes away (its upstream request is cancelled),
one that reads nothing (bounded, and nobody else slows down), and hostile ones (slow
heads, huge heads and bodies, bad framing, too many of them)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.proxy.proxy_support import raw_exchange, read_response, wait_until
from tests.support import pace_server
from tests.support.scripted_upstream import ScriptedUpstream
from tui.proxy.client_socket import HIGH_WATER
from tui.transport.tcp import DRAIN_LIMIT, READ_SIZE


def _stream_request(tokens: int, path: str = "/v1/chat/completions") -> bytes:
    body = json.dumps(
        {
            "model": "pace",
            "stream": True,
            "max_tokens": tokens,
            "messages": [{"role": "user", "content": "hi there"}],
        }
    ).encode()
    return (
        b"POST %s HTTP/1.1\r\nHost: p\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body)
    )


def _connect(url: str) -> socket.socket:
    host, port = url[7:].split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_a_client_that_goes_away_cancels_its_upstream_request(pace, start_proxy) -> None:
    url, server = pace
    proxy = start_proxy(url)
    with _connect(proxy.url) as s:
        s.sendall(_stream_request(2000))  # 20 s of tokens
        s.recv(4096)
        wait_until(lambda: server.stats.active == 1)
        time.sleep(0.1)
    t0 = time.monotonic()
    wait_until(lambda: server.stats.active == 0, 5)  # the upstream stopped generating
    assert time.monotonic() - t0 < 2
    wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1)
    rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
    assert rec.state == "cancelled" and 0 < rec.metrics.output_tokens < 2000
    text = proxy.call(lambda: proxy.proxy.metrics.render().decode())
    assert 'infertop_proxy_requests_cancelled_total{upstream="' in text
    assert server.stats.tokens_sent < 2000


def _frame(ev: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(ev), ev)


def _sse_frame(i: int) -> bytes:
    return _frame(b'data: {"choices":[{"delta":{"content":"tok%d "}}]}\n\n' % i)


END = (
    _frame(b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n')
    + _frame(b"data: [DONE]\n\n")
    + b"0\r\n\r\n"
)
N_BURST = 400_000  # ~24 MB: more than the kernel's socket buffers on both sides hold
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _two_speeds(req: bytes) -> list[tuple[float, bytes]]:
    """A huge answer written at once for /burst; 16 tokens 10 ms apart otherwise."""
    if b"burst" in req.split(b"\r\n", 1)[0]:
        return [(0, HEAD + b"".join(_sse_frame(i) for i in range(N_BURST)) + END)]
    return [(0, HEAD)] + [(0.01, _sse_frame(i)) for i in range(16)] + [(0, END)]


# the paced client's bounds are wall-clock: 16 tokens 10 ms apart take 0.16 s, the test
# allows 1 s (and an ITL p50 of 8-30 ms) — a held-up proxy would take the burst's seconds
@pytest.mark.timing
def test_a_client_that_reads_nothing_is_bounded_and_slows_nobody(start_proxy) -> None:
    """One upstream writes a 24 MB answer at once to a client that reads none of it: the
    proxy holds at most its high-water mark plus one read callback's worth, stops
    reading that upstream socket (TCP holds the rest back there), and another client's
    paced stream through the same proxy keeps its timing. Then the slow client reads:
    every byte arrives, in order."""
    up = ScriptedUpstream(_two_speeds)
    try:
        proxy = start_proxy(up.url)
        slow = _connect(proxy.url)
        slow.sendall(_stream_request(0, "/v1/chat/completions?burst"))

        def buffered() -> int:
            conns = proxy.proxy.connections
            return max((c.transport.get_write_buffer_size() for c in conns), default=0)

        # until the proxy has stopped reading that upstream (the scripted upstream builds
        # its 24 MB first: seconds on a loaded machine), not for a fixed second
        wait_until(
            lambda: proxy.call(lambda: [c.paused for c in proxy.proxy.connections]) == [True], 60
        )
        held = proxy.call(buffered)
        assert HIGH_WATER <= held <= HIGH_WATER + DRAIN_LIMIT + READ_SIZE, held
        assert proxy.call(lambda: [c.paused for c in proxy.proxy.connections]) == [True]
        flying = proxy.call(lambda: list(proxy.proxy.book.in_flight.values()))
        tokens_then = flying[0].tokens
        assert 0 < tokens_then < N_BURST
        # another client through the same proxy: its stream keeps the upstream's pace
        with _connect(proxy.url) as s:
            t0 = time.perf_counter()
            s.sendall(_stream_request(16))
            head, body = read_response(s)
            took = time.perf_counter() - t0
        assert body.count(b"tok") == 16 and took < 1.0
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1)
        fast = proxy.call(lambda: proxy.proxy.book.recent[-1])
        assert fast.metrics.ttft_ms < 100 and 8 < fast.metrics.itl_ms_p50 < 30
        time.sleep(0.3)
        assert proxy.call(lambda: flying[0].tokens) == tokens_then  # still held back
        # now it reads: all of it, in order
        slow.settimeout(20)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            part = slow.recv(1 << 20)
            assert part
            data += part
        slow.close()
        body = data.partition(b"\r\n\r\n")[2]
        assert body == b"".join(_sse_frame(i) for i in range(N_BURST)) + END
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 2)
        assert flying[0].state == "done" and flying[0].metrics.output_tokens == N_BURST
    finally:
        up.stop()


def test_a_client_that_never_reads_is_dropped_after_the_stall_limit(start_proxy) -> None:
    port, server, stop = pace_server.start_in_thread(
        pace_server.PaceConfig(interval_ms=10, ttft_ms=20, tokens=16, burst=True)
    )
    try:
        proxy = start_proxy(f"http://127.0.0.1:{port}", client_stall=0.5)
        with _connect(proxy.url) as slow:
            slow.sendall(_stream_request(60_000))
            wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1, 10)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        assert rec.state == "cancelled"
    finally:
        stop()


def test_hostile_clients(pace, start_proxy) -> None:
    url, _server = pace
    proxy = start_proxy(url, client_timeout=0.5, max_body=1000)
    # a head dripped a byte at a time: closed at the client timeout from its first
    # byte (a drip does not restart it), with a 408
    with _connect(proxy.url) as s:
        t0 = time.monotonic()
        s.settimeout(0.1)
        got = b""
        for c in b"GET /v1/models HTTP/1.1\r\nHost: p\r\nX-Drip: " * 10:
            try:
                s.sendall(bytes([c]))
                got += s.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if got:
                break
        assert got.startswith(b"HTTP/1.1 408") and time.monotonic() - t0 < 2
    # a head past 64 KiB
    got = raw_exchange(proxy.url, b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 431")
    # a body past --max-body, by length and chunked
    got = raw_exchange(proxy.url, b"POST /v1/completions HTTP/1.1\r\nContent-Length: 5000\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 413")
    big = b"800\r\n" + b"x" * 0x800 + b"\r\n"
    got = raw_exchange(
        proxy.url, b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + big
    )
    assert got.startswith(b"HTTP/1.1 413")
    # bad framing and smuggling shapes: 400, connection closed
    for bad in (
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET http://169.254.169.254/ HTTP/1.1\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n",
    ):
        assert raw_exchange(proxy.url, bad).startswith(b"HTTP/1.1 400"), bad
    # the proxy still serves
    with _connect(proxy.url) as s:
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
        assert b'"pace"' in read_response(s)[1]


def test_too_many_clients_get_a_503_when_none_is_idle(pace, start_proxy) -> None:
    """--max-clients 2, both connections in the middle of a request: a third is refused
    (503 on arrival); once one falls idle between requests, a newcomer closes it and is
    served (tui/proxy/limits.py)."""
    url, _server = pace
    proxy = start_proxy(url, max_clients=2, max_per_address=2)
    held = [_connect(proxy.url) for _ in range(2)]
    try:
        for s in held:
            s.sendall(b"GET /v1/models HTTP/1.1\r\n")  # a head begun: busy
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.connections)) == 2)
        with _connect(proxy.url) as s:  # answered on arrival (a request sent now may
            got = s.recv(4096)  # meet a reset instead)
            assert got.startswith(b"HTTP/1.1 503") and b"none idle" in got
        held[0].sendall(b"Host: p\r\n\r\n")  # its request ends: idle from its answer
        assert b'"pace"' in read_response(held[0])[1]
        with _connect(proxy.url) as s:
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
            assert b'"pace"' in read_response(s)[1]
        assert held[0].recv(4096) == b""  # closed to make room
        assert proxy.call(lambda: proxy.proxy.slots.evicted) == 1
    finally:
        for s in held:
            s.close()


def test_a_client_that_hangs_up_after_done_had_its_whole_answer(start_proxy) -> None:
    """The openai SDK closes the connection once it reads ``[DONE]``, before the body's
    last chunk: that request is done, not cancelled."""
    frames = _sse_frame(0) + _sse_frame(1) + END[: -len(b"0\r\n\r\n")]
    up = ScriptedUpstream(lambda _req: [(0, HEAD + frames), (0.5, b"0\r\n\r\n")])
    try:
        proxy = start_proxy(up.url)
        with _connect(proxy.url) as s:
            s.sendall(_stream_request(2))
            got = b""
            while b"[DONE]" not in got:
                got += s.recv(65536)
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        assert rec.state == "done" and rec.metrics.output_tokens == 2
        assert rec.timeline.finish_reason == "stop"
    finally:
        up.stop()
