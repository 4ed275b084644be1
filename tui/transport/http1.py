"""A minimal HTTP/1.1 client for streamed responses over plain ``http://`` (the hot path).

Why: through httpx (httpcore, h11, anyio, one ``wait_for`` task per read) a streamed
chunk costs ~28 µs of CPU before it is parsed; this client costs a few. It does one
thing: send a request with a body and read the response as it streams, on keep-alive
connections. HTTPS, proxies and everything else stay with httpx (see :func:`fast_path_ok`;
tui/transport/http_calls.py sends an engine's calls through one or the other).

Honest timing (tui/transport/tcp.py, StampedConn): on Linux every read carries the
kernel's receive timestamp of its bytes (``SO_TIMESTAMPNS``: when the packet reached the
socket, converted from CLOCK_REALTIME to ``perf_counter_ns``), so a reader thread kept
waiting for the GIL by a busy UI, a garbage collection or the OS scheduler does not shift
the stamp. Elsewhere, or when the kernel gives none, a read is stamped with
``time.perf_counter_ns()`` the moment it returns, before anyone parses or consumes the
bytes.

Timeouts: ``connect`` for the TCP connection; ``read`` for the response head and the first
body bytes; ``stall`` for any later gap between reads. One re-armed timer per connection
checks the deadline (no task or timer per read). Faults raise httpx's exception types
(ConnectError, ConnectTimeout, ReadTimeout, RemoteProtocolError, ReadError) or
:class:`StallTimeout`, so :func:`describe_transport_error` words them as for httpx: this
module is the boundary where the transport's own errors (tui/transport/http_errors.py:
a broken head, a broken body framing) become httpx's.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

import httpx

from tui.transport.http_errors import FramingError
from tui.transport.http_framing import Deframer, UntilClose
from tui.transport.http_head import (
    BadMessage,
    HeadFault,
    HeadReadError,
    ResponseHead,
    framing_for,
    read_response_head,
)
from tui.transport.http_io import HttpTimeouts, StallTimeout
from tui.transport.tcp import Stamped, StampedConn, open_socket


def fast_path_ok(url: str) -> bool:
    """Plain http:// without credentials in the URL, and no HTTP proxy for this host (a
    proxy variable is set but ``NO_PROXY``/``no_proxy`` covers the host: no proxy)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or "@" in parts.netloc:
        return False
    proxies = urllib.request.getproxies()
    if "http" not in proxies and "all" not in proxies:
        return True
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return bool(bypass(parts.hostname, proxies))


class NoResponse(httpx.RemoteProtocolError):
    """The connection closed before any byte of a response came."""


class BodyTooLarge(httpx.RemoteProtocolError):
    """A body read whole was longer than its limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"response body larger than {limit} bytes")
        self.limit = limit


# A body's consumer: called with each read's body bytes and the read's stamp; True = stop
OnPart = Callable[[int, bytes], bool]


def _head_fault(e: HeadReadError) -> httpx.HTTPError:
    """A response head that could not be read, as httpx words it."""
    if e.kind is HeadFault.TIMEOUT:
        return httpx.ReadTimeout("no response within the read timeout")
    if e.kind is HeadFault.CLOSED:
        return NoResponse("Server disconnected without sending a response.")
    if e.kind is HeadFault.CUT:
        return httpx.RemoteProtocolError("Server disconnected mid-way through the head.")
    return httpx.RemoteProtocolError(str(e))


def _framing_fault(e: FramingError) -> httpx.RemoteProtocolError:
    """A body's broken framing (the transport's own error), as httpx words it: the
    boundary where the lean client's faults become httpx's types."""
    return httpx.RemoteProtocolError(str(e))


def _timed_out(before_body: bool) -> Exception:
    """What a body read that waited too long raises: ReadTimeout before any body bytes
    (the ``read`` timeout), else StallTimeout (the ``stall`` timeout)."""
    if before_body:
        return httpx.ReadTimeout("no body within the read timeout")
    return StallTimeout()


class Http1Response:
    """Status, headers and the streamed body of one response."""

    def __init__(
        self, conn: StampedConn, pool: Http1Pool, key: tuple[str, int], method: str = "POST"
    ) -> None:
        self._conn, self._pool, self._key = conn, pool, key
        self._method = method
        self.status_code = 0
        self.reason_phrase = ""
        self.headers: dict[str, str] = {}  # lower-case names (the last of a repeated one)
        self._head: ResponseHead | None = None
        self._rest: list[Stamped] = []  # body bytes read along with the head
        self._complete = False
        self._reusable = False

    @property
    def kernel_stamps(self) -> bool:
        return self._conn.kernel_stamps

    async def _read_head(self, timeout: float) -> None:
        """Read the status line and headers (tui/transport/http_head.py, the one parser
        for infertop's client and its proxy: strict, within ``timeout`` seconds and
        HEAD_LIMIT bytes, interim 1xx heads skipped); faults as httpx's exceptions."""
        try:
            head, self._rest, _t = await read_response_head(self._conn, timeout)
        except HeadReadError as e:
            raise _head_fault(e) from None
        self._head = head
        self.status_code, self.reason_phrase = head.status, head.reason
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
        coding = self.headers.get("content-encoding", "identity").lower()
        if coding != "identity":
            raise httpx.DecodingError(f"unsupported content-encoding {coding!r}")

    def _framing(self) -> tuple[Deframer, bool]:
        """The body's reader (RFC 9112 6.3: :func:`~tui.transport.http_head.framing_for`),
        and whether the server keeps the connection open after it."""
        assert self._head is not None
        try:
            framing, n = framing_for(self._head, self._method)
        except BadMessage as e:
            raise httpx.RemoteProtocolError(str(e)) from None
        return framing.deframer(n), self._head.keep_alive

    async def push_body(self, timeouts: HttpTimeouts, on_part: OnPart) -> None:
        """:meth:`stamped_body`, pushed: ``on_part(t_ns, data)`` is called from the socket's
        read callback with each read's body bytes (no task woken per read), until the
        body ends or it returns True. Stamps, timeouts and faults as for stamped_body;
        what ``on_part`` raises is raised here."""
        body, keep = self._framing()
        fed = False  # body bytes came (from then on the stall timeout applies)

        def sink(t_ns: int, data: bytes) -> bool:
            nonlocal fed
            fed = True
            out = body.feed(data)
            if body.done:  # (bytes after its end in this read: body.extra, not reusable)
                self._settle(body, keep, leftover=False)
            return (bool(out) and on_part(t_ns, out)) or body.done

        if body.done:  # an empty body (Content-Length: 0)
            self._settle(body, keep, leftover=bool(self._rest))
            return
        rest, self._rest = self._rest, []  # body bytes read along with the head
        try:
            for t_ns, data in rest:
                if sink(t_ns, data):
                    return
            first = timeouts.stall if fed else timeouts.read
            if await self._conn.pump(sink, first, timeouts.stall):
                return
        except TimeoutError:
            raise _timed_out(before_body=not fed) from None
        except FramingError as e:
            raise _framing_fault(e) from None
        if isinstance(body, UntilClose):  # the server closed: that is the body's end
            self._settle(body, keep, leftover=False)
            return
        raise self._cut_short()

    async def stamped_body(self, timeouts: HttpTimeouts) -> AsyncIterator[Stamped]:
        """Body bytes (de-chunked) with the stamp of the network read that brought them.

        The first read may wait ``timeouts.read``, later ones ``timeouts.stall``.
        """
        body, keep = self._framing()
        parts, self._rest = self._rest, []
        first = not parts  # no body bytes came with the head
        while not body.done:
            if not parts:
                try:
                    parts = await self._conn.take(timeouts.read if first else timeouts.stall)
                except TimeoutError:
                    raise _timed_out(before_body=first) from None
                first = False
                if not parts:
                    if isinstance(body, UntilClose):
                        break
                    raise self._cut_short()
            for i, (t, data) in enumerate(parts):
                try:
                    out = body.feed(data)
                except FramingError as e:
                    raise _framing_fault(e) from None
                if body.done:
                    # settled before the last yield: a consumer that stops at the end of
                    # the stream (SSE [DONE]) still leaves a reusable connection
                    self._settle(body, keep, leftover=i + 1 < len(parts))
                if out:
                    yield t, out
                if body.done:
                    return
            parts = []
        self._settle(body, keep, leftover=False)

    def _cut_short(self) -> httpx.HTTPError:
        """The connection closed before the framed body's end: what to raise."""
        if self._conn.error is not None:
            return httpx.ReadError(str(self._conn.error) or "connection reset")
        return httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body"
        )

    def _settle(self, body: Deframer, keep: bool, leftover: bool) -> None:
        """The body is complete; the connection is reusable when the server keeps it
        open, the body's end was framed, and no bytes came after it."""
        self._complete = True
        self._reusable = (
            keep and not isinstance(body, UntilClose) and not body.extra and not leftover
        )

    async def read_all(self, timeouts: HttpTimeouts, limit: int) -> bytes:
        """The whole body (a small JSON answer, a metrics page); transport faults raise,
        and so does a body over ``limit`` bytes (BodyTooLarge). The parts are joined
        once, at the end (appending bytes to bytes made each read copy all before it).
        The caller bounds the whole read in time (a drip resets no overall deadline)."""
        parts: list[bytes] = []
        size = 0
        async for _, part in self.stamped_body(timeouts):
            parts.append(part)
            size += len(part)
            if size > limit:
                raise BodyTooLarge(limit)
        return b"".join(parts)

    async def aread(
        self, limit: int, timeouts: HttpTimeouts, into: list[bytes] | None = None
    ) -> bytes:
        """Up to ``limit`` body bytes (for error pages); transport faults end it quietly.
        ``into``: a list the parts are appended to as they come (a caller that gives up
        waiting keeps what came)."""
        parts: list[bytes] = [] if into is None else into
        size = 0
        try:
            async for _, part in self.stamped_body(timeouts):
                parts.append(part)
                size += len(part)
                if size >= limit:
                    break
        except (httpx.HTTPError, StallTimeout):
            pass
        return b"".join(parts)[:limit]

    async def aclose(self) -> None:
        """Give the connection back when the body was read to its end, else close it."""
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is None:
            return
        if self._complete and self._reusable and not conn.closed and not conn.parts:
            conn.park()  # (from now on, a byte from the server closes it)
            self._pool.put(self._key, conn)
        else:
            conn.close()


class Http1Pool:
    """Keep-alive connections per (host, port); use it on one event loop only.

    Once closed, a connection given back (a stream that was still running when its
    engine closed) is closed instead of kept: nothing would ever take it again, and the
    loop's reader callback would keep its socket open for the life of the process.
    """

    def __init__(self, headers: dict[str, str], timeouts: HttpTimeouts) -> None:
        self.headers = headers
        self.timeouts = timeouts
        self._idle: dict[tuple[str, int], list[StampedConn]] = {}
        self.closed = False

    def put(self, key: tuple[str, int], conn: StampedConn) -> None:
        if self.closed:
            conn.close()
            return
        self._idle.setdefault(key, []).append(conn)

    async def _connect(self, host: str, port: int) -> StampedConn:
        loop = asyncio.get_running_loop()
        try:
            sock = await asyncio.wait_for(open_socket(loop, host, port), self.timeouts.connect)
        except TimeoutError:
            raise httpx.ConnectTimeout("connect timed out") from None
        except OSError as e:
            raise httpx.ConnectError(str(e)) from e
        return StampedConn(loop, sock)

    async def post(
        self, url: str, body: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> Http1Response:
        """Send a POST; returns once the response head is in (its body streams after)."""
        return await self.request("POST", url, body, content_type, extra)

    async def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        content_type: str = "",
        extra: dict[str, str] | None = None,
    ) -> Http1Response:
        """Send a request (a body only when given); returns once the response head is in
        (its body streams after). ``extra``: header fields of this request alone."""
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port or 80
        key = (host, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        fields = {"host": ("Host", parts.netloc), "accept": ("Accept", "*/*")}
        if content_type:
            fields["content-type"] = ("Content-Type", content_type)
        for k, v in self.headers.items():  # the engine's headers win, as with httpx
            fields[k.lower()] = (k, v)
        for k, v in (extra or {}).items():
            fields[k.lower()] = (k, v)
        if body is not None:
            fields["content-length"] = ("Content-Length", str(len(body)))
        head = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in fields.values()), "", ""]
        message = "\r\n".join(head).encode("latin-1") + (body or b"")
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.unpark():
                continue
            try:
                return await self._exchange(conn, key, message, method)
            except NoResponse:
                pass  # a kept-alive connection the server had closed: try a fresh one
        return await self._exchange(await self._connect(host, port), key, message, method)

    async def _exchange(
        self, conn: StampedConn, key: tuple[str, int], message: bytes, method: str
    ) -> Http1Response:
        resp = Http1Response(conn, self, key, method)
        try:
            await conn.send(message)
            await resp._read_head(self.timeouts.read)
        except BaseException:
            conn.close()
            raise
        return resp

    def close(self) -> None:
        """Close the idle connections; those in use close when their response ends."""
        self.closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

    async def aclose(self) -> None:
        """:meth:`close`, as a coroutine to run on the pool's loop and wait for."""
        self.close()
