"""One request's answer through the proxy: passed on read by read (the exchange's task).

The request went upstream as it came (its end-to-end headers in their order and case,
Host set to the upstream's, the body whole with its length: tui/proxy/exchange.py). The
answer comes back the same way: its status line and end-to-end headers as the upstream
sent them, then every read of the upstream socket written to the client *from the read
callback itself*, before anything else looks at it — a chunked body to an HTTP/1.1 client
keeps its chunk framing byte for byte, and an HTTP/1.0 client gets the bytes de-chunked
and the connection closed. Only then does the request's observer
(:mod:`tui.proxy.observe`) read a copy, later (the book's queue of reads).

Faults, as the client sees them: an upstream that cannot be reached, or sends no head
in time, is a 502 (504 for a timeout) with a JSON error body; one that fails mid-answer
closes the client's connection before the answer's end (so an incomplete answer cannot
pass for a whole one). A client that goes away cancels the exchange: its upstream
connection is closed at once (engines stop generating for a closed connection).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial

from tui.core.events import FailureKind
from tui.proxy.exchange import Client, Exchange, ExchangeState
from tui.proxy.observe import Observer, observer_for
from tui.proxy.observe_queue import ObserveQueue
from tui.proxy.upstream import UpstreamConn, UpstreamError, UpstreamFault, UpstreamPool
from tui.proxy.wire import both_framings, client_response, error_response
from tui.transport.http_errors import FramingError
from tui.transport.http_framing import Chunked, Framing
from tui.transport.http_head import BadMessage, ResponseHead, connection_tokens, framing_for
from tui.transport.tcp import Stamped


async def forward(ex: Exchange) -> bool:
    """The exchange's task: send ``ex`` (or go on sending it) and pass its answer on;
    True when the client connection stays open for another request. It ends the
    exchange however it goes: done, unanswered, cut short, cancelled (the client gone)
    or failed (an internal error, raised on)."""
    ex.run()
    ending = ExchangeState.FAILED
    try:
        keep, ending = await _pass_on(ex)
        return keep
    except asyncio.CancelledError:
        ending = ExchangeState.CANCELLED
        ex.client_gone()
        raise
    finally:
        ex.end(ending)


async def _pass_on(ex: Exchange) -> tuple[bool, ExchangeState]:
    """Send, then pass the answer on (see the module docstring): whether the client
    connection is kept, and how the exchange ended."""
    client, keep = ex.client, ex.req.head.keep_alive
    try:
        upstream, resp, rest = await ex.send()
    except UpstreamError as e:
        timeout = e.kind is UpstreamFault.TIMEOUT
        status, reason = (504, "Gateway Timeout") if timeout else (502, "Bad Gateway")
        rec = ex.booked()
        if rec is not None:
            rec.fail(f"upstream: {e}", "timeout" if timeout else "connect")
        client.write(error_response(status, reason, str(e), close=not keep))
        return keep, ExchangeState.UNANSWERED
    try:
        return await _pass_answer(ex, upstream, resp, rest)
    except BaseException:
        upstream.close()  # (an answer not passed whole: that connection is not kept)
        raise


async def _pass_answer(
    ex: Exchange, upstream: UpstreamConn, resp: ResponseHead, rest: list[Stamped]
) -> tuple[bool, ExchangeState]:
    """The answer's head came: pass it on, and its body (:func:`_pass_on`)."""
    fw, client, head = ex.fw, ex.client, ex.req.head
    keep, unanswered = head.keep_alive, ExchangeState.UNANSWERED
    rec = ex.rec
    try:
        framing, length = framing_for(resp, head.method)
    except BadMessage as e:
        upstream.close()
        if rec is not None:
            rec.fail(f"upstream sent {e}", "protocol")
        client.write(error_response(502, "Bad Gateway", f"the upstream sent {e}", not keep))
        return keep, unanswered
    ex.answered()  # the body is not sent again
    passthrough = head.version == "HTTP/1.1"
    chunked, until_close = framing is Framing.CHUNKED, framing is Framing.CLOSE
    close_after = not keep or until_close or (chunked and not passthrough)
    reusable = (
        b"close" not in connection_tokens(resp.headers)
        and not until_close
        and not both_framings(resp)  # (a smuggling shape: that connection is not kept)
    )
    head_bytes = client_response(resp, chunked and passthrough, close_after)
    if framing is Framing.NONE or not rest:
        client.write(head_bytes)  # now: the body may be a while
        head_bytes = b""
    observer: Observer | None = None
    if rec is not None:
        rec.status = resp.status
        observer = rec.observer = observer_for(rec, resp, rec.dialect)
    if framing is Framing.NONE:
        if observer is not None:
            observer.end(time.perf_counter_ns())
        _settle(fw.pool, upstream, reusable and not rest)
        return not close_after, ExchangeState.DONE
    raw_chunks = chunked and passthrough
    ok, t_last, clean = await _pump_body(
        ex, upstream, framing, length, rest, observer, raw_chunks, head_bytes
    )
    if not ok:  # the client's connection is closed: the answer was cut short
        return False, ExchangeState.CUT
    if observer is not None:
        fw.book.reads.after(partial(observer.end, t_last))  # after its last reads
    _settle(fw.pool, upstream, reusable and clean)
    return not close_after, ExchangeState.DONE


def _settle(pool: UpstreamPool, upstream: UpstreamConn, reusable: bool) -> None:
    if reusable:
        pool.release(upstream)
    else:
        upstream.close()


async def _pump_body(
    ex: Exchange,
    upstream: UpstreamConn,
    framing: Framing,
    length: int,
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
    body = framing.deframer(length)
    chunks = body if raw_chunks and isinstance(body, Chunked) else None
    client, fw = ex.client, ex.fw
    write = client.write
    observe = None if observer is None or observer.off else observer.feed
    later = fw.book.reads.put
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
        done = await upstream.pump(sink, fw.read_timeout, fw.stall_timeout)
    except TimeoutError:
        silent = f"the upstream sent nothing for {fw.stall_timeout:g} s"
        _cut(fw.book.reads, client, observer, silent, "timeout")
        return False, last[0], False
    except FramingError as e:  # the upstream's chunk framing is broken
        why = f"the upstream broke its framing: {e}"
        _cut(fw.book.reads, client, observer, why, "protocol")
        return False, last[0], False
    finally:
        client.upstream = None
    if done or framing is Framing.CLOSE:
        return True, last[0], not body.extra
    why = f"connection reset ({upstream.error})" if upstream.error else "connection closed"
    _cut(fw.book.reads, client, observer, f"the upstream's answer was cut short: {why}", "protocol")
    return False, last[0], False


def _cut(
    reads: ObserveQueue, client: Client, observer: Observer | None, why: str, kind: FailureKind
) -> None:
    """The answer cannot be completed: the client connection closes; the request fails
    with the failure ``kind`` the caller names (once its reads still queued are
    observed)."""
    if observer is not None:
        rec = observer.record

        def cut() -> None:
            if not rec.ended:
                rec.fail(why, kind)

        reads.after(cut)
    client.close()
