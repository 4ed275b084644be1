"""One client connection of the proxy: reading its requests within bounds and running
each one's exchange. The socket under it — who the client is, its connection slot, the
writing of its answers and their bounds, the deadline of the read in progress — is
:class:`~tui.proxy.client_socket.ClientSocket`, which :class:`ClientConnection` extends.

A connection reads one request at a time: its head within
:data:`~tui.transport.http_head.HEAD_LIMIT` bytes, its body within ``max_body`` bytes
(Content-Length or chunked), both within ``client_timeout`` seconds of the request's
first byte (a drip does not restart the clock); a kept-alive connection may then wait
``idle_timeout`` for the next. Bytes a client sends while its answer streams (a pipelined
request) are kept up to :data:`PIPELINE_LIMIT`, then its socket is not read until the
answer ends. A body's bytes are held in the proxy's body budget (:mod:`tui.proxy.limits`)
as they arrive, until the upstream has answered it (the request may be sent again until
then); when the budget is full, the body arriving that made no progress the longest is
dropped to make room for another (its client refused, 503).

Paths under ``/infertop/`` are the proxy's own (:mod:`tui.proxy.own_routes`); every other
request is forwarded: its :class:`~tui.proxy.exchange.Exchange` is made here, in one
place (:meth:`ClientConnection._exchange`), sent now from this read callback on an idle
kept-alive upstream connection where there is one, and then run as a task
(:func:`tui.proxy.forward.forward`). A plain request (:mod:`tui.proxy.plain_head`) whole
in the buffer, with a kept-alive upstream connection idle, is sent upstream before its
head is parsed; the parse, the same as every request's, follows the send.
"""

from __future__ import annotations

import asyncio
import time

from tui.proxy import own_routes
from tui.proxy.client_socket import ClientParts, ClientSocket
from tui.proxy.exchange import ClientRequest, Exchange, Sending, send_now
from tui.proxy.forward import forward
from tui.proxy.plain_head import match_plain, plain_upstream_head
from tui.proxy.wire import error_response
from tui.transport.http_errors import FramingError
from tui.transport.http_framing import Chunked
from tui.transport.http_head import HEAD_LIMIT, BadMessage, RequestHead, parse_request_head

BUDGET_FULL = (
    "the proxy holds as many bytes of request bodies as it may (--body-budget-mb), "
    "none of them stalled: try again shortly"
)
BODY_DROPPED = (
    "the proxy needed the room your request body held: of the bodies arriving when "
    "--body-budget-mb was full, yours had made no progress the longest"
)
PIPELINE_LIMIT = 64 * 1024
OWN_PREFIX = own_routes.PREFIX.encode()


class ClientConnection(ClientSocket):
    """One client connection (see the module docstring)."""

    def __init__(self, parts: ClientParts) -> None:
        super().__init__(parts)
        self.buf = bytearray()
        self.head: RequestHead | None = None
        self.chunks: Chunked | None = None
        self.body: list[bytes] = []
        self.body_size = 0
        self.reading = True
        self.started = False  # a request's first bytes came: its deadline runs
        self.eof = False  # the client half-closed: no request follows this one

    # -- asyncio.Protocol ---------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.idle = False  # a request begins (or goes on)
        self.buf += data
        if self.task is not None:  # bytes while an answer streams: a pipelined request
            if len(self.buf) > PIPELINE_LIMIT and self.reading:
                self.reading = False
                assert self.transport is not None
                self.transport.pause_reading()
            return
        self._advance()

    def eof_received(self) -> bool:
        self.eof = True
        if self.task is None:
            return False  # nothing in flight: close
        return True  # a half-closed client may still read its answer

    # -- reading a request -------------------------------------------------------------
    def _timed_out(self) -> None:
        """Past its deadline: a request begun and not yet whole is answered 408 first."""
        if self.task is None and not self.closed and (self.head is not None or self.buf.strip()):
            self.write(error_response(408, "Request Timeout", "request not complete", True))
        super()._timed_out()

    def _hold(self, n: int) -> bool:
        """``n`` more bytes of the body being read came: held in the proxy's budget
        (another body, stalled, may be dropped to make room); False: no room (the client
        is refused, 503, and closed)."""
        hold = self.hold
        assert hold is not None
        if hold.take(n):
            return True
        self._refuse(503, "Service Unavailable", BUDGET_FULL)
        return False

    def _body_dropped(self) -> None:
        """The body budget dropped the body being read to make room (its bytes given back
        already): the client is refused (503) and closed."""
        self.hold = None
        self.buf, self.body = bytearray(), []
        self._refuse(503, "Service Unavailable", BODY_DROPPED)

    def _advance(self) -> None:
        """Parse what came; start the exchange once a request is whole."""
        config = self.parts
        if self.head is None:
            end = self.buf.find(b"\r\n\r\n", 0, HEAD_LIMIT + 4)
            if end > 0 and self._plain(end):
                return
            if self.buf[:2] == b"\r\n":
                while self.buf[:2] == b"\r\n":  # blank lines before a request (RFC 9112 2.2)
                    del self.buf[:2]
                end = self.buf.find(b"\r\n\r\n", 0, HEAD_LIMIT + 4)
            if self.buf and not self.started:  # its first byte: the deadline starts
                self.started = True
                self._arm(config.client_timeout)
            if end < 0:
                if len(self.buf) > HEAD_LIMIT:
                    self._refuse(431, "Request Header Fields Too Large", "request head too long")
                return
            try:
                head = parse_request_head(bytes(self.buf[:end]))
            except BadMessage as e:
                self._refuse(400, "Bad Request", str(e))
                return
            del self.buf[: end + 4]
            if head.content_length is not None and head.content_length > config.max_body:
                self._refuse(413, "Content Too Large", f"body over {config.max_body} bytes")
                return
            if head.content_length or head.chunked:  # its bytes held as they come
                self.hold = self.fw.budget.hold(self.key, self._body_dropped)
            self.head = head
            self.chunks = Chunked() if head.chunked else None
            self.body, self.body_size = [], 0
            expect = head.get(b"expect")
            if expect is not None and expect.lower() == b"100-continue":
                if head.chunked or head.content_length:
                    self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        head = self.head
        if self.chunks is not None:
            try:
                out = self.chunks.feed(bytes(self.buf))
            except FramingError as e:
                self._refuse(400, "Bad Request", f"bad chunked body: {e}")
                return
            rest = self.chunks.leftover
            self.buf = bytearray(self.buf[len(self.buf) - rest :]) if rest else bytearray()
            if out:
                self.body.append(out)
                self.body_size += len(out)
            if self.body_size > config.max_body:
                self._refuse(413, "Content Too Large", f"body over {config.max_body} bytes")
                return
            if out and not self._hold(len(out)):
                return
            if not self.chunks.done:
                return
            body = b"".join(self.body)
        else:
            n = head.content_length or 0
            if n:
                assert self.hold is not None
                new = min(len(self.buf), n) - self.hold.held  # (bytes that came, only)
                if new > 0 and not self._hold(new):
                    return
            if len(self.buf) < n:
                return
            with memoryview(self.buf) as view:
                body = bytes(view[:n])  # (one copy)
            del self.buf[:n]
        self._disarm()
        self.head, self.chunks, self.body, self.started = None, None, [], False
        hold, self.hold = self.hold, None
        if hold is not None:
            hold.whole()  # held until answered, never dropped from now
        req = ClientRequest(head, body, time.perf_counter_ns(), hold)
        if req.head.path.startswith(own_routes.PREFIX):
            if hold is not None:
                hold.release()
                req.hold = None
            self._run(req, None)
        else:
            self._exchange(req, None)

    def _plain(self, end: int) -> bool:
        """A plain request (:mod:`tui.proxy.plain_head`; its head's blank line at
        ``end``), whole in the buffer, not the proxy's own, with a kept-alive upstream
        connection idle: sent upstream now, as :class:`~tui.proxy.exchange.Exchange`
        would send it, then parsed and checked as every request is, and its exchange
        made (all off its way in). False, with nothing done: anything else, which the
        strict path takes."""
        buf, fw = self.buf, self.fw
        if fw.trace == "propagate":
            return False  # its head gets a traceparent: the strict path writes it
        m = match_plain(buf, end)
        if m is None or m["target"].startswith(OWN_PREFIX):
            return False
        start, length = m.end(), int(m["length"])
        if len(buf) < start + length or length > self.parts.max_body:
            return False
        if not fw.budget.fits(self.key, length):
            return False  # (the strict path makes room, or refuses it)
        conn = fw.pool.idle_conn()
        if conn is None:
            return False
        t_received = time.perf_counter_ns()
        head_bytes = plain_upstream_head(m, fw.host_header, fw.path_prefix)
        sending = send_now(conn, head_bytes + buf[start : start + length])
        raw, body = bytes(buf[: start - 4]), bytes(buf[start : start + length])
        del buf[: start + length]  # (only now: m's groups are read from buf)
        hold = fw.budget.hold(self.key)  # (it fits: nothing ran since it was asked)
        hold.take(length)
        self._disarm()
        self.started = False
        try:
            head = parse_request_head(raw)
        except BadMessage as e:  # never (tests/proxy/test_plain_head.py), but if it were:
            if sending is not None:
                sending.conn.close()  # the upstream drops the request it began to get
            hold.release()
            self._refuse(400, "Bad Request", str(e))
            return True
        self._exchange(ClientRequest(head, body, t_received, hold), sending)
        return True

    def _exchange(self, req: ClientRequest, sending: Sending | None) -> None:
        """The request's exchange, the one place one is made: sent now from this read
        callback (``sending``: already, by :meth:`_plain`; else on an idle kept-alive
        upstream connection, if there is one), then its task."""
        ex = self.exchange = Exchange(self.fw, self, req)
        ex.start(sending)
        self._run(req, ex)

    def _run(self, req: ClientRequest, ex: Exchange | None) -> None:
        """The request's task: its exchange (forward), or the proxy's own route."""
        self.task = asyncio.get_running_loop().create_task(self._handle(req, ex))

    async def _handle(self, req: ClientRequest, ex: Exchange | None) -> None:
        keep = False
        try:
            if ex is None:
                keep = await own_routes.serve(self.fw.book, self, req)
            else:
                keep = await forward(ex)
        except asyncio.CancelledError:
            return
        except Exception as e:  # noqa: BLE001 - a bug must not take the proxy down
            self.parts.note(f"internal error on {self.peer}: {type(e).__name__}: {e}")
            self.write(error_response(500, "Internal Server Error", "internal error", True))
        finally:
            self.task = self.exchange = None
        if not keep or self.closed or self.eof:
            self.close()
            return
        self._arm(self.parts.idle_timeout)
        if not self.buf and self.slotted:  # idle between requests from now
            self.idle = True
            self.parts.slots.idle(self)
        if not self.reading and self.transport is not None:
            self.reading = True
            self.transport.resume_reading()
        if self.buf:
            self._advance()
