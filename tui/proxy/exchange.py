"""One request's trip through the proxy (:class:`Exchange`): made in one place (the client
connection, once a request is whole or a plain one sent), sent upstream one way, booked.

Its lifecycle is one explicit state (:class:`ExchangeState`), moved only along
:data:`NEXT`:

    NEW ──▶ SENT_NOW ──▶ RUNNING ──▶ ANSWERED ──▶ DONE | CUT | FAILED | CANCELLED
    NEW ───────────────▶ RUNNING ──▶ UNANSWERED (502/504) | FAILED | CANCELLED
    NEW, SENT_NOW ──▶ CANCELLED (its client gone before its task ran)

The constructor does no I/O. :meth:`Exchange.start`, from the client connection's read
callback, sends the request now where a kept-alive upstream connection is idle (*sent
now*; the plain path may have sent it already) — before a task is made and first run,
which costs ~50 µs of every request's way in with the proxy's caches cold between
requests (benchmarks/proxy_request_path.py). Its task (:func:`tui.proxy.forward.forward`)
then runs it (:meth:`~Exchange.run`) and goes on in :meth:`Exchange.send`: the rest of the
message, or, for an exchange not sent now (no idle connection, or the send failed), the
whole message on an idle or a new connection, by the same primitive, :func:`send_now`.
A kept-alive connection the upstream had closed is tried once more on a new one, as HTTP
clients do. A client that goes away before the task ran (the same loop turn) is a
transition too (:meth:`Exchange.cancel`: the exchange ends there, as its task would have
ended it), never a callback on the task.

The exchange counts its request as departing (:meth:`~Exchange.depart`) just after the
first send, and makes its record (a generation request's timeline) once it is on its
way: a burst of requests arriving together all leave before any of them is booked. Its
body holds bytes of the proxy's body budget (tui/proxy/limits.py) until the upstream
answered (:meth:`~Exchange.let_go`): until then the body may be sent again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from enum import Enum
from typing import Final, Protocol

from tui.core.trace_context import TraceMode
from tui.proxy import routes
from tui.proxy.body_scan import request_fields
from tui.proxy.book import Departure, RequestBook
from tui.proxy.identity import ClientKeys, identify, peer_host
from tui.proxy.limits import BodyBudget, Hold
from tui.proxy.peer_process import PeerProcess, ProcessFinder
from tui.proxy.record import ProxiedRequest
from tui.proxy.tracing import trace_for, traceparent_field
from tui.proxy.upstream import (
    NoResponse,
    UpstreamConn,
    UpstreamError,
    UpstreamPool,
    read_response_head,
)
from tui.proxy.wire import upstream_request
from tui.transport.http_calls import KERNEL_STAMPS, READ_STAMPS
from tui.transport.http_head import RequestHead, ResponseHead
from tui.transport.tcp import Stamped

NOT_SENT = "none (the request never reached the upstream)"


@dataclass
class ClientRequest:
    """A whole request from a client: head, body, when its last byte came, and its hold
    on the proxy's body budget, kept until :meth:`Exchange.let_go`."""

    head: RequestHead
    body: bytes
    t_received_ns: int
    hold: Hold | None = None


class Client(Protocol):
    """The client side of one connection (tui/proxy/client_conn.py, ClientConnection)."""

    peer: str
    closed: bool
    paused: bool  # its unsent bytes passed the high-water mark: upstream reads wait
    upstream: UpstreamConn | None

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def peer_process(self) -> PeerProcess:
        """The local process owning its socket (looked up once, off the path)."""
        ...


@dataclass(frozen=True)
class Forwarding:
    """What an exchange uses of the proxy: the upstream (its pool, its Host and path, how
    long to wait for it), the book that counts and keeps requests, the body budget."""

    pool: UpstreamPool
    host_header: str  # the upstream's, for the Host field sent upstream
    path_prefix: str  # an upstream behind a path (a gateway): put in front of each path
    read_timeout: float  # the answer's head and first body bytes
    stall_timeout: float  # any later gap between the upstream's reads
    book: RequestBook
    budget: BodyBudget
    keys: ClientKeys | None = None  # API keys' fingerprints (None: not taken)
    finder: ProcessFinder | None = None  # local clients' processes (None: not looked up)
    trace: TraceMode = "off"  # a request's traceparent: read, passed on (tui/proxy/tracing.py)


@dataclass
class Sending:
    """A message sent by :func:`send_now`: on which connection, the whole message, when,
    and how many of its bytes the socket took then."""

    conn: UpstreamConn
    message: bytes
    t_ns: int
    sent: int


def send_now(conn: UpstreamConn, message: bytes) -> Sending | None:
    """Send ``message`` on ``conn`` now: what its socket takes (the exchange's task sends
    the rest). None: the upstream had closed it (closed now; the task retries on a new
    one). The one way the proxy sends a request upstream."""
    t_ns = time.perf_counter_ns()
    try:
        sent = conn.sock.send(message)
    except (BlockingIOError, InterruptedError):
        sent = 0
    except OSError:
        conn.close()
        return None
    return Sending(conn, message, t_ns, sent)


def _stamps(conn: UpstreamConn) -> str:
    return KERNEL_STAMPS if conn.kernel_stamps else READ_STAMPS


class ExchangeState(Enum):
    """Where one exchange is (see the module docstring); the last five are its end."""

    NEW = "new"  # made: nothing sent
    SENT_NOW = "sent now"  # sent (or begun) from the read callback; its task not yet run
    RUNNING = "running"  # its task runs: sending, then waiting for the answer's head
    ANSWERED = "answered"  # the answer's head came: its body passes on
    DONE = "done"  # ended: the answer passed on to its framed end
    UNANSWERED = "unanswered"  # ended: no answer came (the proxy answered 502 or 504)
    CUT = "cut short"  # ended: the answer could not be completed (the client was closed)
    CANCELLED = "cancelled"  # ended: the client went away first (before its task ran too)
    FAILED = "failed"  # ended: the proxy itself failed (an internal error, a 500)


_S = ExchangeState
# every transition there is: from -> what may follow (h11 keeps its states so)
NEXT: Final[dict[ExchangeState, frozenset[ExchangeState]]] = {
    _S.NEW: frozenset({_S.SENT_NOW, _S.RUNNING, _S.CANCELLED}),
    _S.SENT_NOW: frozenset({_S.RUNNING, _S.CANCELLED}),
    _S.RUNNING: frozenset({_S.ANSWERED, _S.UNANSWERED, _S.CANCELLED, _S.FAILED}),
    _S.ANSWERED: frozenset({_S.DONE, _S.CUT, _S.CANCELLED, _S.FAILED}),
}
ENDED: Final = frozenset({_S.DONE, _S.UNANSWERED, _S.CUT, _S.CANCELLED, _S.FAILED})
NOT_RUN: Final = frozenset({_S.NEW, _S.SENT_NOW})  # its task has not begun


class Exchange:
    """One request's trip through the proxy (see the module docstring): made with no
    I/O, in :attr:`state` ``NEW``; :meth:`start` from the read callback, then its task
    (:func:`tui.proxy.forward.forward`) :meth:`run`, :meth:`answered`, :meth:`end`; or
    :meth:`cancel` when its client goes away."""

    def __init__(self, fw: Forwarding, client: Client, req: ClientRequest) -> None:
        self.fw, self.client, self.req = fw, client, req
        self.dialect = routes.dialect(req.head.method, req.head.path)
        self.state = ExchangeState.NEW
        self.trace = trace_for(fw.trace, req.head) if self.dialect is not None else None
        self.rec: ProxiedRequest | None = None
        self.departure: Departure | None = None
        self.sending: Sending | None = None  # sent now: on which connection, how much

    def _to(self, state: ExchangeState) -> None:
        if state not in NEXT.get(self.state, ()):
            raise RuntimeError(f"an exchange cannot go from {self.state.value} to {state.value}")
        self.state = state

    # -- the transitions ------------------------------------------------------------------
    def start(self, sending: Sending | None = None) -> None:
        """From the read callback, before the task is made: ``sending``, the plain path
        sent it already; else sent now on an idle kept-alive connection if there is one.
        Sent: *sent now*, counted as departing (after the send: off the way in)."""
        if sending is None:
            conn = self.fw.pool.idle_conn()
            if conn is not None:
                sending = send_now(conn, self.message())
        if sending is not None:
            self._to(ExchangeState.SENT_NOW)
            self.sending = sending
            self.depart()

    def run(self) -> None:
        """Its task begins: it owns the exchange's end from now."""
        self._to(ExchangeState.RUNNING)

    def answered(self) -> None:
        """The answer's head came: the body will not be sent again (let go of)."""
        self._to(ExchangeState.ANSWERED)
        self.let_go()

    def cancel(self) -> None:
        """Its client went away. Before its task ran (it never will: the caller cancels
        it), the exchange ends here as the task would have ended it — the upstream
        connection it was sent on closed, the request booked as cancelled; after, the
        task's own cancellation ends it (:func:`tui.proxy.forward.forward`)."""
        if self.state not in NOT_RUN:
            return
        sending, self.sending = self.sending, None
        if sending is not None:
            sending.conn.close()
            self.sent(sending.t_ns, _stamps(sending.conn))
        self.client_gone()
        self.end(ExchangeState.CANCELLED)

    def end(self, state: ExchangeState) -> None:
        """The exchange is over, as ``state`` says: the body let go of, the request
        booked (a generation request's record, or a count of another)."""
        assert state in ENDED
        self._to(state)
        rec = self.booked()
        self.let_go()
        if rec is not None:
            self.fw.book.end(rec)
        else:
            failed, cancelled = state is ExchangeState.FAILED, state is ExchangeState.CANCELLED
            self.fw.book.other(self.req.head.path, failed, cancelled)

    # -- sending ------------------------------------------------------------------------
    def message(self) -> bytes:
        """What goes upstream: the head (tui/proxy/wire.py, upstream_request), the body."""
        fw, req = self.fw, self.req
        traceparent = traceparent_field(fw.trace, self.trace)
        head = upstream_request(
            req.head, fw.host_header, len(req.body), fw.path_prefix, traceparent
        )
        return head + req.body

    async def send(self) -> tuple[UpstreamConn, ResponseHead, list[Stamped]]:
        """Send the request upstream (going on from where :func:`send_now` stopped, or
        on a kept-alive connection, or a new one) and read the answer's head (see the
        module docstring). Sent here, the task yields once after the send: requests that
        came together all leave before any is booked."""
        fw = self.fw
        first, self.sending = self.sending, None
        message = first.message if first is not None else self.message()
        for reused_first in (True, False):
            now, first = first, None
            conn = now.conn if now is not None else fw.pool.idle_conn() if reused_first else None
            reused = conn is not None
            if conn is None:
                conn = await fw.pool.connect()
            try:
                if now is None:
                    self.depart()
                    now = send_now(conn, message)
                    if now is None:
                        raise OSError("the upstream closed the connection")
                    await asyncio.sleep(0)
                if now.sent < len(message):
                    await conn.send(memoryview(message)[now.sent :])  # (no copy)
                self.sent(now.t_ns, _stamps(conn))
                head, rest, _t = await read_response_head(conn, fw.read_timeout)
                return conn, head, rest
            except (NoResponse, OSError) as e:
                conn.close()
                if reused:
                    continue
                if isinstance(e, UpstreamError):
                    raise
                raise UpstreamError(f"sending to the upstream failed: {e}") from None
            except BaseException:
                conn.close()
                raise
        raise UpstreamError("the upstream closed every connection")  # pragma: no cover

    def let_go(self) -> None:
        """The body will not be sent again (the upstream answered, or the exchange
        ended): its bytes are let go of, and so is its hold on the body budget."""
        req = self.req
        if req.hold is not None:
            req.hold.release()
            req.hold = None
        req.body = b""

    # -- counting and booking -------------------------------------------------------------
    def depart(self) -> None:
        """It is about to be sent: counted (its record comes after the send)."""
        if self.dialect is not None and self.departure is None:
            self.departure = self.fw.book.depart()

    def sent(self, t_ns: int, stamps: str) -> None:
        """The request went upstream at ``t_ns`` (again, after a retry)."""
        if self.dialect is None:
            return
        if self.rec is None:
            head, req, book = self.req.head, self.req, self.fw.book
            said = request_fields(req.body, head.path)  # (bounded: tui/proxy/body_scan.py)
            self.rec = ProxiedRequest(
                book.next_id(),
                self.client.peer,
                head.method,
                head.path,
                self.dialect,
                said.model,
                said.stream,
                req.t_received_ns,
                req.body,
            )
            process = self.client.peer_process()
            self.rec.identity = identify(
                head, said.user, peer_host(self.client.peer), self.fw.keys, process.name
            )
            self.rec.process = process
            self.rec.trace = self.trace
            book.start(self.rec, self.departure)
        self.rec.sent(t_ns, stamps)

    def booked(self) -> ProxiedRequest | None:
        """The record, made now if the request never left (a generation request always
        has a row, whatever happened to it)."""
        if self.rec is None and self.dialect is not None:
            self.sent(time.perf_counter_ns(), NOT_SENT)
        return self.rec

    def client_gone(self) -> None:
        """The client hung up: after the stream said it was over, the request is done (the
        body's last bytes were still on their way); before, it was cancelled. Decided once
        its reads still queued are observed (the book runs the queue when it books it)."""
        rec = self.booked()
        if rec is None:
            return

        def gone() -> None:
            obs = rec.observer
            if obs is not None and not obs.off and obs.complete:
                obs.end(rec.t_last or time.perf_counter_ns())
            else:
                rec.fail("the client disconnected: its upstream request was cancelled", "cancelled")

        self.fw.book.reads.after(gone)
