"""Forwarding, against an upstream that sends exact bytes on a schedule: the same bytes
reach the client, each read at once; the request reaches the upstream as it came; faults
are the upstream's own or a 502/504 that says why."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.proxy.proxy_support import raw_exchange, read_response, wait_until
from tests.support.scripted_upstream import CLOSE, HANG, ScriptedUpstream, chunked, sse_head

SSE = [
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n',
    b'data: {"choices":[{"delta":{},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n',
    b"data: [DONE]\n\n",
]
REQUEST = (
    b"POST /v1/chat/completions?trace=1 HTTP/1.1\r\nHost: proxy\r\nUser-Agent: test/1\r\n"
    b"Authorization: Bearer sk-secret\r\nX-Custom: Mixed Case\r\nContent-Type: application/json\r\n"
    b'Content-Length: 27\r\n\r\n{"model":"m","stream":true}'
)


def as_forwarded(up: ScriptedUpstream) -> bytes:
    """REQUEST as the upstream gets it: the same bytes, its Host set to the upstream's."""
    return (
        b"POST /v1/chat/completions?trace=1 HTTP/1.1\r\nHost: " + up.url[7:].encode()
        + b"\r\nUser-Agent: test/1\r\nAuthorization: Bearer sk-secret\r\n"
        b"X-Custom: Mixed Case\r\nContent-Type: application/json\r\nContent-Length: 27\r\n"
        b'\r\n{"model":"m","stream":true}'
    )  # fmt: skip


def test_the_answer_reaches_the_client_byte_for_byte(start_proxy) -> None:
    body = chunked(*SSE)
    # the upstream's writes cut the chunk framing in awkward places
    pieces = [body[:7], body[7:50], body[50:51], body[51:200], body[200:]]
    up = ScriptedUpstream(lambda _req: [(0, sse_head())] + [(0.01, p) for p in pieces])
    try:
        proxy = start_proxy(up.url)
        got = raw_exchange(
            proxy.url, REQUEST.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n", 1)
        )
        head, _, rest = got.partition(b"\r\n\r\n")
        assert rest == body  # chunk framing and all, as the upstream wrote it
        assert head == (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Upstream-Case: Kept\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close"
        )
        # and the request reached the upstream as it came (Host set to the upstream's)
        assert up.requests[0] == as_forwarded(up)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        assert rec.state == "done" and rec.metrics.output_tokens == 2
        assert rec.metrics.output_tokens_source == "usage" and rec.timeline.text == "Hello"
    finally:
        up.stop()


def test_each_upstream_read_is_passed_on_at_once(start_proxy) -> None:
    """Five events 80 ms apart: each reaches the client within a few ms of being sent
    (no buffering), and the proxy's own stamp of it lies between the two."""
    frames = [b"%x\r\n%s\r\n" % (len(e), e) for e in SSE] + [b"0\r\n\r\n"]
    up = ScriptedUpstream(lambda _req: [(0, sse_head())] + [(0.08, f) for f in frames])
    try:
        proxy = start_proxy(up.url)
        host, port = proxy.url[7:].split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(REQUEST)
            got: list[tuple[int, bytes]] = []
            buf = b""
            while not buf.endswith(b"0\r\n\r\n"):
                data = s.recv(65536)
                assert data
                got.append((time.perf_counter_ns(), data))
                buf += data
        # (the upstream stamps a piece after its send returns: on a busy machine the
        # client may read the last piece before that stamp is kept)
        wait_until(lambda: up.exchanges[0].done)
        sent = up.sent_ns[0][1:]  # after the head
        arrived = [t for t, d in got if not d.startswith(b"HTTP/1.1")]
        assert len(arrived) == len(sent) == len(frames)  # one client read per upstream write
        lags = [(a - s) / 1e6 for a, s in zip(arrived, sent)]
        assert max(lags) < 25, lags  # loaded CI; typically ~0.2 ms (benchmarks/proxy_overhead.py)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        stamps = rec.timeline.chunk_ns  # the two chunks with text
        # (a loopback packet reaches the proxy's socket inside the upstream's send call:
        # its kernel stamp may precede the upstream's clock read after that call)
        for stamp, s_ns, a_ns in zip(stamps, sent[1:3], arrived[1:3]):
            assert s_ns - 1_000_000 <= stamp <= a_ns
    finally:
        up.stop()


def test_an_http10_client_gets_the_body_dechunked_then_close(start_proxy) -> None:
    up = ScriptedUpstream(lambda _req: [(0, sse_head() + chunked(*SSE))])
    try:
        proxy = start_proxy(up.url)
        got = raw_exchange(proxy.url, REQUEST.replace(b"HTTP/1.1", b"HTTP/1.0", 1))
        head, _, rest = got.partition(b"\r\n\r\n")
        assert rest == b"".join(SSE)
        assert b"Transfer-Encoding" not in head and head.endswith(b"Connection: close")
    finally:
        up.stop()


def test_length_close_and_no_body_framings(start_proxy) -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    answers = {
        b"/len": [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")],
        b"/close": [
            (0, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil "),
            (0.02, b"close"),
            (0, CLOSE),
        ],
        b"/204": [(0, b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n")],
        b"/interim": [
            (0, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"),
            (0.01, ok),
        ],
    }
    up = ScriptedUpstream(lambda req: answers[req.split(b" ")[1]])
    try:
        proxy = start_proxy(up.url)
        host, port = proxy.url[7:].split(":")
        with socket.create_connection((host, int(port))) as s:
            for path, body in ((b"/len", b"hello"), (b"/204", b""), (b"/interim", b"ok")):
                s.sendall(b"GET %s HTTP/1.1\r\nHost: p\r\n\r\n" % path)
                head, got = read_response(s)
                assert got == body and b"100 Continue" not in head
            s.sendall(b"GET /close HTTP/1.1\r\nHost: p\r\n\r\n")
            rest = b""
            while data := s.recv(65536):
                rest += data
            assert rest.endswith(b"\r\n\r\nuntil close") and b"Connection: close" in rest
    finally:
        up.stop()


def test_keep_alive_upstream_connections_are_reused(start_proxy) -> None:
    up = ScriptedUpstream(lambda _req: [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")])
    try:
        proxy = start_proxy(up.url)
        host, port = proxy.url[7:].split(":")
        with socket.create_connection((host, int(port))) as s:
            for _ in range(5):
                s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
                assert read_response(s)[1] == b"ok"
        assert up.connections == 1
        # pipelined: two requests in one write, answered in order
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"GET /a HTTP/1.1\r\nHost: p\r\n\r\nGET /b HTTP/1.1\r\nHost: p\r\n\r\n")
            assert read_response(s)[1] == b"ok" and read_response(s)[1] == b"ok"
        assert [r.split(b" ")[1] for r in up.requests[-2:]] == [b"/a", b"/b"]
    finally:
        up.stop()


def test_bytes_after_the_framed_end_are_not_passed_on(start_proxy) -> None:
    up = ScriptedUpstream(
        lambda _req: [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA-JUNK")]
    )
    try:
        proxy = start_proxy(up.url)
        host, port = proxy.url[7:].split(":")
        with socket.create_connection((host, int(port))) as s:
            for _ in range(2):
                s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
                head, body = read_response(s)
                assert body == b"ok"
        assert up.connections == 2  # a connection that sent junk is not reused
    finally:
        up.stop()


def test_expect_100_continue_and_a_chunked_request(start_proxy) -> None:
    up = ScriptedUpstream(lambda _req: [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")])
    try:
        proxy = start_proxy(up.url)
        host, port = proxy.url[7:].split(":")
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: p\r\nExpect: 100-continue\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
            assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
            s.sendall(b'4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n')
            assert read_response(s)[1] == b"ok"
        req = up.requests[0]
        assert req.endswith(b'Content-Length: 7\r\n\r\n{"a":1}') and b"Expect" not in req
        assert b"Transfer-Encoding" not in req
    finally:
        up.stop()


def test_an_error_status_passes_through_unchanged_and_fails_the_row(start_proxy) -> None:
    err = b'{"error":{"message":"model \\"nope\\" not found","code":404}}'
    up = ScriptedUpstream(
        lambda _req: [(0, b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (len(err), err))]
    )  # fmt: skip
    try:
        proxy = start_proxy(up.url)
        got = raw_exchange(
            proxy.url, REQUEST.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n", 1)
        )
        assert got.startswith(b"HTTP/1.1 404 Not Found\r\n") and got.endswith(err)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        assert rec.state == "failed" and rec.row().error == 'HTTP 404: model "nope" not found'
        assert rec.timeline.error_kind == "http"
    finally:
        up.stop()


def test_an_unreachable_or_silent_upstream_is_a_502_or_504(start_proxy) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    proxy = start_proxy(dead)
    got = raw_exchange(
        proxy.url, b"GET /v1/models HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"
    )
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 502 Bad Gateway")
    assert "connection refused" in json.loads(body)["error"]["message"]
    up = ScriptedUpstream(lambda _req: [(0, HANG)])
    try:
        silent = start_proxy(up.url, read_timeout=0.5)
        got = raw_exchange(
            silent.url, REQUEST.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n", 1)
        )
        assert got.startswith(b"HTTP/1.1 504 Gateway Timeout")
        rec = silent.call(lambda: silent.proxy.book.recent[-1])
        assert rec.state == "failed" and rec.timeline.error_kind == "timeout"
    finally:
        up.stop()


def test_an_answer_cut_short_upstream_is_cut_short_for_the_client(start_proxy) -> None:
    """The upstream dies mid-body: the client's connection closes before the last chunk
    (so no client can take a partial answer for a whole one) and the row fails."""
    body = chunked(*SSE)
    up = ScriptedUpstream(lambda _req: [(0, sse_head() + body[:120]), (0.02, CLOSE)])
    try:
        proxy = start_proxy(up.url)
        got = raw_exchange(proxy.url, REQUEST)
        assert got.endswith(body[:120]) and not got.endswith(b"0\r\n\r\n")
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        assert rec.state == "failed" and "cut short" in rec.timeline.error
    finally:
        up.stop()


@pytest.mark.parametrize("stall", [True, False])
def test_a_stalled_upstream_stream_ends_in_time(start_proxy, stall: bool) -> None:
    frames = [(0, sse_head() + b"%x\r\n%s\r\n" % (len(SSE[1]), SSE[1]))]
    up = ScriptedUpstream(lambda _req: frames + [(0, HANG)] if stall else frames + [(0, CLOSE)])
    try:
        proxy = start_proxy(up.url, read_timeout=0.6, stall_timeout=0.6)
        t0 = time.monotonic()
        raw_exchange(proxy.url, REQUEST)
        assert time.monotonic() - t0 < 5
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.recent)) == 1)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        assert rec.state == "failed" and rec.metrics.output_tokens == 1
        assert rec.timeline.error_kind == ("timeout" if stall else "protocol")
    finally:
        up.stop()


@contextmanager
def kept_alive(start_proxy: Any, up: ScriptedUpstream) -> Iterator[tuple[Any, Any, socket.socket]]:
    """A proxy in front of ``up`` and a client whose first request (GET /v1/models, which
    ``up`` answers "ok") left one upstream connection kept alive: (the proxy's thread, the
    proxy, the client's socket)."""
    proxy = start_proxy(up.url)
    host, port = proxy.url[7:].split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
        assert read_response(s)[1] == b"ok"
        p = proxy.proxy
        assert p is not None
        yield proxy, p, s


def test_a_request_goes_upstream_from_the_read_callback(start_proxy) -> None:
    """On a kept-alive upstream connection, the request is sent from the client's read
    callback (before its task runs): once a request's bytes are handed to the proxy's
    connection, the upstream has them before the loop turns again."""
    up = ScriptedUpstream(lambda _req: [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")])
    try:
        with kept_alive(start_proxy, up) as (proxy, p, s):
            assert len(p.connections) == 1

            def hand_over() -> bool:
                (conn,) = p.connections
                conn.data_received(b"GET /second HTTP/1.1\r\nHost: p\r\n\r\n")
                task = conn.task
                return task is not None and not task.done() and p.pool.idle_conn() is None

            assert proxy.call(hand_over)  # its task made, not yet run; the connection taken
            wait_until(lambda: len(up.requests) == 2)
            assert up.requests[1].startswith(b"GET /second HTTP/1.1\r\n")
            assert read_response(s)[1] == b"ok"
        assert up.connections == 1
    finally:
        up.stop()


def test_a_client_gone_before_its_task_ran_still_cancels_upstream(start_proxy) -> None:
    """A request sent from the read callback whose client goes away in the same loop turn
    (its task cancelled before it began): the upstream connection is closed (the engine
    stops), and the request is booked as cancelled, not left in flight."""
    sse = chunked(*SSE[:3])

    def script(req: bytes) -> list:
        if req.startswith(b"GET"):
            return [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")]
        return [(0, sse_head())] + [(0.05, sse[:10])] * 200  # a long answer

    up = ScriptedUpstream(script)
    try:
        with kept_alive(start_proxy, up) as (proxy, p, s):

            def request_then_gone() -> bool:
                (conn,) = p.connections
                conn.data_received(REQUEST)
                started = conn.task is not None and not conn.task.done()
                conn.connection_lost(ConnectionResetError("reset by peer"))
                return started

            assert proxy.call(request_then_gone)
            wait_until(up.closed_by_peer.is_set)  # its upstream connection was closed
            assert len(up.requests) == 2 and up.requests[1].startswith(b"POST /v1/chat")

            def booked() -> tuple[int, list[str]]:
                return p.book.active, [r.state for r in p.book.recent]

            wait_until(lambda: proxy.call(booked) == (0, ["cancelled"]))
    finally:
        up.stop()


def _ok_or_sse(req: bytes) -> list:
    if req.startswith(b"GET"):
        return [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")]
    return [(0, sse_head()), (0.01, chunked(*SSE))]


def test_a_plain_request_is_sent_before_its_head_is_parsed(start_proxy, monkeypatch) -> None:
    """On a kept-alive upstream connection, a plain request (tui/proxy/plain_head.py) goes
    upstream before its head is parsed, as the strict path sends it, and is booked the
    same; one that is not plain (a tab in a value) is parsed first, as before."""
    from tui.proxy import client_conn, exchange

    order: list[str] = []
    parse, send_now = client_conn.parse_request_head, client_conn.send_now

    def parsed(raw: bytes):  # type: ignore[no-untyped-def]
        order.append("parsed")
        return parse(raw)

    def sent(conn, message: bytes):  # type: ignore[no-untyped-def]
        order.append("sent")
        return send_now(conn, message)

    monkeypatch.setattr(client_conn, "parse_request_head", parsed)
    monkeypatch.setattr(client_conn, "send_now", sent)
    monkeypatch.setattr(exchange, "send_now", sent)  # (the strict path's, in the Exchange)
    up = ScriptedUpstream(_ok_or_sse)
    try:
        with kept_alive(start_proxy, up) as (proxy, p, s):
            order.clear()
            s.sendall(REQUEST)
            assert read_response(s)[1] == b"".join(SSE)
            assert order == ["sent", "parsed"]
            order.clear()
            s.sendall(REQUEST.replace(b"X-Custom: Mixed Case", b"X-Custom: Mixed\tCase"))
            assert read_response(s)[1] == b"".join(SSE)
            assert order == ["parsed", "sent"]
        assert up.connections == 1
        assert up.requests[1] == as_forwarded(up)
        assert up.requests[2] == up.requests[1].replace(b"Mixed Case", b"Mixed\tCase")
        rows = proxy.call(lambda: [r.row() for r in proxy.proxy.book.recent])
        assert [(r.route, r.model, r.stream, r.state, r.output_tokens) for r in rows] == [
            ("/v1/chat/completions", "m", True, "done", 2)
        ] * 2
    finally:
        up.stop()


def test_a_plain_head_the_strict_parser_refuses_is_cut_off(start_proxy, monkeypatch) -> None:
    """Were a head taken as plain that the strict parser refuses (the equivalence tests
    in test_plain_head.py say none is), the upstream connection it went on is closed,
    the client gets a 400, and no row is made."""
    import re

    from tui.proxy import client_conn

    loose = re.compile(rb"POST (?P<target>\S+) HTTP/1\.1\r\n(?P<fields>(?:.*\r\n)*?)\r\n")

    def too_loose(buf: bytes, end: int):  # type: ignore[no-untyped-def]
        m = loose.match(buf)
        return m if m is None else _WithLength(m)

    monkeypatch.setattr(client_conn, "match_plain", too_loose)
    up = ScriptedUpstream(_ok_or_sse)
    try:
        with kept_alive(start_proxy, up) as (proxy, p, s):
            (conn,) = proxy.call(lambda: list(p.pool._idle))
            s.sendall(REQUEST.replace(b"User-Agent:", b"User-Agent :"))
            head, body = read_response(s)
            assert head.startswith(b"HTTP/1.1 400 ") and b"bad header line" in body
            assert conn.closed
            assert proxy.call(lambda: (len(p.book.recent), p.book.active)) == (0, 0)
    finally:
        up.stop()


class _WithLength:
    """A match whose ``length`` group is 27 (REQUEST's body)."""

    def __init__(self, m) -> None:  # type: ignore[no-untyped-def]
        self.m = m

    def __getitem__(self, group: str) -> bytes:
        return b"27" if group == "length" else self.m[group]

    def end(self, *group: str) -> int:
        return self.m.end(*group)


def test_a_head_in_pieces_is_matched_once_whole(start_proxy, monkeypatch) -> None:
    """The plain regex runs once a head's blank line is in, not on each read of a head
    that drips in (each run scans the whole buffer: byte by byte, a 64 KiB head would
    cost a scan of 64 KiB per byte)."""
    from tui.proxy import client_conn

    ends: list[int] = []
    match_plain = client_conn.match_plain

    def counted(buf: bytes, end: int):  # type: ignore[no-untyped-def]
        ends.append(end)
        return match_plain(buf, end)

    monkeypatch.setattr(client_conn, "match_plain", counted)
    up = ScriptedUpstream(_ok_or_sse)
    try:
        with kept_alive(start_proxy, up) as (proxy, p, s):
            ends.clear()

            def drip() -> None:
                (conn,) = p.connections
                for i in range(len(REQUEST)):
                    conn.data_received(REQUEST[i : i + 1])

            proxy.call(drip)
            assert read_response(s)[1] == b"".join(SSE)
            assert ends == [REQUEST.index(b"\r\n\r\n")]
        assert up.requests[1].endswith(b'\r\n\r\n{"model":"m","stream":true}')
    finally:
        up.stop()


def test_a_connection_field_naming_content_length_does_not_strip_it(start_proxy) -> None:
    """A hostile upstream's ``Connection: content-length`` (no sender may list a field
    meant for every recipient): the client still gets the length, so it reads the answer
    at once and the connection stays usable (without the length a keep-alive client
    waited for a close: the proxy's 75 s idle timeout)."""
    up = ScriptedUpstream(
        lambda _req: [(0, b"HTTP/1.1 200 OK\r\nConnection: content-length\r\n"
                          b"Content-Length: 5\r\n\r\nhello")]
    )  # fmt: skip
    try:
        proxy = start_proxy(up.url)
        host, port = proxy.url[7:].split(":")
        with socket.create_connection((host, int(port)), timeout=5) as s:
            for _ in range(2):
                s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
                head, body = read_response(s, timeout=5)
                assert head == b"HTTP/1.1 200 OK\r\nContent-Length: 5" and body == b"hello"
    finally:
        up.stop()


def test_an_answer_with_both_lengths_goes_on_by_its_transfer_encoding(start_proxy) -> None:
    """Content-Length and Transfer-Encoding together (a smuggling shape): read by its
    chunks, passed on without the Content-Length (RFC 9112 6.3), and the upstream
    connection is not kept."""
    body = chunked(b"abc", b"de")
    up = ScriptedUpstream(
        lambda _req: [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A: 1\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n" + body)]
    )  # fmt: skip
    try:
        proxy = start_proxy(up.url)
        host, port = proxy.url[7:].split(":")
        with socket.create_connection((host, int(port)), timeout=5) as s:
            for _ in range(2):
                s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
                head, got = read_response(s, timeout=5)
                assert head == b"HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked"
                assert got == b"abcde"
        assert up.connections == 2
    finally:
        up.stop()
