"""One request through the proxy: forwarded unchanged, its answer passed on read by read.

The request goes upstream as it came (its end-to-end headers in their order and case,
Host set to the upstream's, the body whole with its length: see
:func:`~tui.proxy.wire.upstream_request`). The answer comes back the same way: its
status line and end-to-end headers as the upstream sent them, then every read of the
upstream socket written to the client *from the read callback itself*, before anything
else looks at it — a chunked body to an HTTP/1.1 client keeps its chunk framing byte for
byte, and an HTTP/1.0 client gets the bytes de-chunked and the connection closed. Only
then does the request's observer (:mod:`tui.proxy.observe`) read a copy.

Faults, as the client sees them: an upstream that cannot be reached, or sends no head
in time, is a 502 (504 for a timeout) with a JSON error body; one that fails mid-answer
closes the client's connection before the answer's end (so an incomplete answer cannot
pass for a whole one). A client that goes away cancels the exchange: its upstream
connection is closed at once (engines stop generating for a closed connection).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from tui.proxy import routes
from tui.proxy.book import Departure
from tui.proxy.observe import Observer, observer_for
from tui.proxy.record import ProxiedRequest
from tui.proxy.upstream import NoResponse, UpstreamConn, UpstreamError, read_response_head
from tui.proxy.wire import (
    PassChunked,
    both_framings,
    client_response,
    error_response,
    upstream_request,
)
from tui.transport.http_calls import KERNEL_STAMPS, READ_STAMPS
from tui.transport.http_framing import Framing, Sized, UntilClose
from tui.transport.http_head import BadMessage, RequestHead, connection_tokens, response_framing
from tui.transport.tcp import Stamped

if TYPE_CHECKING:
    from tui.proxy.server import Proxy

NOT_SENT = "none (the request never reached the upstream)"
BUDGET_FULL = (
    "the proxy holds as many bytes of request bodies as it may (--body-budget-mb): "
    "try again shortly"
)

try:
    from orjson import loads as json_loads
except ImportError:  # pragma: no cover - a dependency
    from json import loads as json_loads  # type: ignore[assignment]


@dataclass
class ClientRequest:
    """A whole request from a client: head, body, when its last byte came, and the bytes
    of the proxy's body budget it holds (tui/proxy/limits.py) until :meth:`Exchange.let_go`."""

    head: RequestHead
    body: bytes
    t_received_ns: int
    held: int = 0


class Client(Protocol):
    """The client side of one connection (tui/proxy/server.py, ClientConnection)."""

    peer: str
    closed: bool
    paused: bool  # its unsent bytes passed the high-water mark: upstream reads wait
    upstream: UpstreamConn | None

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


def request_fields(body: bytes, path: str) -> tuple[str | None, bool | None]:
    """(``model``, ``stream``) of a generation request's JSON body (None: not said;
    Ollama's routes stream unless told not to)."""
    stream: bool | None = True if routes.ollama_streams_by_default(path) else False
    try:
        obj = json_loads(body) if body else None
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(obj, dict):
        return None, None
    model = obj.get("model")
    if isinstance(obj.get("stream"), bool):
        stream = obj["stream"]
    return (model if isinstance(model, str) else None), stream


@dataclass
class EarlySend:
    """A request sent from the client's read callback (:func:`send_early`): on which
    kept-alive connection, the whole message, when, and how many bytes the socket took."""

    conn: UpstreamConn
    message: bytes
    t_ns: int
    sent: int


class Exchange:
    """One request's trip through the proxy. Its record (a generation request's
    timeline) is made once the request is on its way upstream, so a burst of requests
    arriving together all leave before any of them is booked (see :func:`_send`)."""

    def __init__(self, proxy: Proxy, client: Client, req: ClientRequest) -> None:
        self.proxy, self.client, self.req = proxy, client, req
        self.dialect = routes.dialect(req.head.method, req.head.path)
        self.rec: ProxiedRequest | None = None
        self.departure: Departure | None = None
        self.early: EarlySend | None = None
        self.entered = False  # forward() began: it owns the exchange's ending from then

    def message(self) -> bytes:
        """What goes upstream: the head (tui/proxy/wire.py, upstream_request), the body."""
        proxy, req = self.proxy, self.req
        head = upstream_request(req.head, proxy.host_header, len(req.body), proxy.path_prefix)
        return head + req.body

    def never_ran(self, task: asyncio.Task[None]) -> None:
        """The done-callback of an exchange sent early: its task was cancelled before it
        began (the client went away in the same loop turn), so :func:`forward` never ran
        to end it. Ended here as forward would have: the upstream connection closed, the
        request booked as cancelled."""
        early, self.early = self.early, None
        if self.entered or early is None:
            return
        early.conn.close()
        self.sent(early.t_ns, _stamps(early.conn))
        self.let_go()
        rec = self.booked()
        if rec is not None:
            _client_gone(self, rec)
            self.proxy.book.end(rec)

    def let_go(self) -> None:
        """The body will not be sent again (the upstream answered, or the exchange
        ended): its bytes are let go of, and so is its hold on the body budget."""
        req = self.req
        if req.held:
            self.proxy.budget.give(req.held)
            req.held = 0
        req.body = b""

    def depart(self) -> None:
        """It is about to be sent: counted (its record comes after the send)."""
        if self.dialect is not None and self.departure is None:
            self.departure = self.proxy.book.depart()

    def sent(self, t_ns: int, stamps: str) -> None:
        """The request went upstream at ``t_ns`` (again, after a retry)."""
        if self.dialect is None:
            return
        if self.rec is None:
            head, req = self.req.head, self.req
            model, stream = request_fields(req.body, head.path)
            self.rec = ProxiedRequest(
                self.proxy.book.next_id(),
                self.client.peer,
                head.method,
                head.path,
                self.dialect,
                model,
                stream,
                req.t_received_ns,
                req.body,
            )
            self.proxy.book.start(self.rec, self.departure)
        self.rec.sent(t_ns, stamps)

    def booked(self) -> ProxiedRequest | None:
        """The record, made now if the request never left (a generation request always
        has a row, whatever happened to it)."""
        if self.rec is None and self.dialect is not None:
            self.sent(time.perf_counter_ns(), NOT_SENT)
        return self.rec


def _stamps(conn: UpstreamConn) -> str:
    return KERNEL_STAMPS if conn.kernel_stamps else READ_STAMPS


def send_early(ex: Exchange) -> None:
    """Send ``ex`` upstream now, from the client's read callback, on a kept-alive
    connection: before a task is made and first run, which costs ~50 µs on every
    request's way in with the proxy's caches cold between requests
    (benchmarks/proxy_request_path.py). What the socket does not take now, a request
    with no idle connection to go on, and a failed send go on in the exchange's task
    (:func:`_send`); a burst of requests still all leave before any is booked."""
    conn = ex.proxy.pool.idle_conn()
    if conn is None:
        return
    ex.early = send_now(conn, ex.message())
    ex.depart()  # after the send, off the way in: nothing else runs in between


def send_now(conn: UpstreamConn, message: bytes) -> EarlySend | None:
    """Send ``message`` on ``conn``, an idle kept-alive connection, from a read callback:
    what its socket takes now (:class:`EarlySend`; the exchange's task sends the rest).
    None: the upstream had closed it (closed now; the task retries on a new one)."""
    t_ns = time.perf_counter_ns()
    try:
        sent = conn.sock.send(message)
    except (BlockingIOError, InterruptedError):
        sent = 0
    except OSError:
        conn.close()
        return None
    return EarlySend(conn, message, t_ns, sent)


async def _send(ex: Exchange) -> tuple[UpstreamConn, Any, list[Stamped]]:
    """Send the request upstream (on a kept-alive connection, or a new one) and read the
    answer's head. After sending, the task yields once: requests that came together are
    all forwarded before any is booked. A kept-alive connection the upstream had closed
    is retried once on a new one, as HTTP clients do. A request :func:`send_early` sent
    goes on from where it stopped."""
    proxy = ex.proxy
    early, ex.early = ex.early, None
    message = early.message if early is not None else ex.message()
    for reused_first in (True, False):
        now, early = early, None
        conn = now.conn if now is not None else proxy.pool.idle_conn() if reused_first else None
        reused = conn is not None
        if conn is None:
            conn = await proxy.pool.connect()
        try:
            if now is not None:
                t_ns = now.t_ns
                if now.sent < len(message):
                    await conn.send(message[now.sent :])
            else:
                ex.depart()
                t_ns = time.perf_counter_ns()
                await conn.send(message)
                await asyncio.sleep(0)
            ex.sent(t_ns, _stamps(conn))
            head, rest, _t = await read_response_head(conn, proxy.config.read_timeout)
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


async def forward(
    proxy: Proxy, client: Client, req: ClientRequest, ex: Exchange | None = None
) -> bool:
    """Forward ``req`` and pass its answer on; True when the client connection stays
    open for another request. ``ex``: its exchange, made (and perhaps sent:
    :func:`send_early`) by the caller."""
    ex = ex or Exchange(proxy, client, req)
    ex.entered = True
    failed = cancelled = False
    try:
        return await _exchange(ex)
    except asyncio.CancelledError:
        cancelled = True
        rec = ex.booked()
        if rec is not None:
            _client_gone(ex, rec)
        raise
    except Exception:
        failed = True
        raise
    finally:
        rec = ex.booked()
        ex.let_go()
        if rec is not None:
            proxy.book.end(rec)
        else:
            proxy.book.other(req.head.path, failed, cancelled)


def _client_gone(ex: Exchange, rec: ProxiedRequest) -> None:
    """The client hung up: after the stream said it was over, the request is done (the
    body's last bytes were still on their way); before, it was cancelled. Decided once
    its reads still queued are observed (the book runs the queue when it books it)."""

    def gone() -> None:
        obs = rec.observer
        if obs is not None and not obs.off and obs.complete:
            obs.end(rec.t_last or time.perf_counter_ns())
        else:
            rec.fail("the client disconnected: its upstream request was cancelled", "cancelled")

    ex.proxy.book.reads.after(gone)


async def _exchange(ex: Exchange) -> bool:
    proxy, client, head = ex.proxy, ex.client, ex.req.head
    keep = head.keep_alive
    try:
        upstream, resp, rest = await _send(ex)
        ex.let_go()  # answered: the body is not sent again
    except UpstreamError as e:
        status, reason = (504, "Gateway Timeout") if e.kind == "timeout" else (502, "Bad Gateway")
        rec = ex.booked()
        if rec is not None:
            rec.fail(f"upstream: {e}", "timeout" if e.kind == "timeout" else "connect")
        client.write(error_response(status, reason, str(e), close=not keep))
        return keep
    rec = ex.rec
    try:
        framing, length = response_framing(resp, head.method)
    except BadMessage as e:
        upstream.close()
        if rec is not None:
            rec.fail(f"upstream sent {e}", "protocol")
        client.write(error_response(502, "Bad Gateway", f"the upstream sent {e}", not keep))
        return keep
    passthrough = head.version == "HTTP/1.1"
    close_after = not keep or framing == "close" or (framing == "chunked" and not passthrough)
    reusable = (
        b"close" not in connection_tokens(resp.headers)
        and framing != "close"
        and not both_framings(resp)  # (a smuggling shape: that connection is not kept)
    )
    head_bytes = client_response(resp, framing, passthrough, close_after)
    if framing == "none" or not rest:
        client.write(head_bytes)  # now: the body may be a while
        head_bytes = b""
    observer: Observer | None = None
    if rec is not None:
        rec.status = resp.status
        observer = rec.observer = observer_for(rec, resp, rec.dialect)
    if framing == "none":
        if observer is not None:
            observer.end(time.perf_counter_ns())
        _settle(proxy, upstream, reusable and not rest)
        return not close_after
    try:
        raw_chunks = framing == "chunked" and passthrough
        ok, t_last, clean = await _pump_body(
            proxy, client, upstream, framing, length, rest, observer, raw_chunks, head_bytes
        )
    except BaseException:
        upstream.close()
        raise
    if not ok:
        return False  # the client's connection is closed: the answer was cut short
    if observer is not None:
        proxy.book.reads.after(partial(observer.end, t_last))  # after its last reads
    _settle(proxy, upstream, reusable and clean)
    return not close_after


def _settle(proxy: Proxy, upstream: UpstreamConn, reusable: bool) -> None:
    if reusable:
        proxy.pool.release(upstream)
    else:
        upstream.close()


async def _pump_body(
    proxy: Proxy,
    client: Client,
    upstream: UpstreamConn,
    framing: str,
    length: int | None,
    rest: list[Stamped],
    observer: Observer | None,
    raw_chunks: bool,
    head: bytes = b"",
) -> tuple[bool, int, bool]:
    """Pass the body on, read by read (see the module docstring): (whole, last stamp,
    nothing came after its end). ``raw_chunks``: a chunked body goes on with its framing
    as it came. ``head``: the response head, written with the first body bytes (that
    came with it: one write, one wake-up of the client). Not whole: it was cut short
    (the client connection is then closed)."""
    body: Framing
    if framing == "length":
        body = Sized(length or 0)
    elif framing == "chunked":
        body = PassChunked()
    else:
        body = UntilClose()
    chunks = body if raw_chunks and isinstance(body, PassChunked) else None
    write = client.write
    observe = None if observer is None or observer.off else observer.feed
    later = proxy.book.reads.put
    last = [0]
    lead = [head]

    def sink(t_ns: int, data: bytes) -> bool:
        out = body.feed(data)
        if chunks is not None:
            if chunks.done and chunks.extra:
                data = data[: len(data) - chunks.leftover]
            piece = data
        else:
            piece = out
        if lead[0]:
            piece, lead[0] = lead[0] + piece, b""
        if piece and not client.closed:
            write(piece)
        last[0] = t_ns
        if observe is not None and out:
            later(observe, t_ns, out)
        return body.done

    client.upstream = upstream
    if client.paused:
        upstream.pause_reading()
    try:
        for t_ns, data in rest:
            if sink(t_ns, data):
                return True, last[0], not body.extra
        timeouts = proxy.config
        done = await upstream.pump(sink, timeouts.read_timeout, timeouts.stall_timeout)
    except TimeoutError:
        silent = f"the upstream sent nothing for {proxy.config.stall_timeout:g} s"
        _cut(proxy, client, observer, silent)
        return False, last[0], False
    except httpx.RemoteProtocolError as e:  # the upstream's chunk framing is broken
        _cut(proxy, client, observer, f"the upstream broke its framing: {e}")
        return False, last[0], False
    finally:
        client.upstream = None
    if done or isinstance(body, UntilClose):
        return True, last[0], not body.extra
    why = f"connection reset ({upstream.error})" if upstream.error else "connection closed"
    _cut(proxy, client, observer, f"the upstream's answer was cut short: {why}")
    return False, last[0], False


def _cut(proxy: Proxy, client: Client, observer: Observer | None, why: str) -> None:
    """The answer cannot be completed: the client connection closes; the request fails
    (once its reads still queued are observed)."""
    if observer is not None:
        rec, kind = observer.record, "timeout" if "sent nothing" in why else "protocol"

        def cut() -> None:
            if not rec.ended:
                rec.fail(why, kind)

        proxy.book.reads.after(cut)
    client.close()
