"""Connections to the upstream server: kernel-stamped reads, keep-alive, pausing.

Each connection is a :class:`~tui.transport.tcp.StampedConn` (every read carries the
kernel's receive time where the socket gives it, else the time the read returned) that
can also stop reading for a while (:meth:`UpstreamConn.pause_reading`): when a client
reads slower than its upstream writes, the proxy stops reading that one upstream socket
instead of buffering without end, and TCP flow control slows that one stream only.
"""

from __future__ import annotations

import asyncio

from tui.proxy.wire import HEAD_LIMIT, BadMessage, ResponseHead, parse_response_head
from tui.transport.tcp import Stamped, StampedConn, open_socket


class UpstreamError(Exception):
    """The upstream could not be reached or did not answer as HTTP (one line: why)."""

    def __init__(self, message: str, kind: str = "connect") -> None:
        super().__init__(message)
        self.kind = kind  # connect | timeout | protocol


class NoResponse(UpstreamError):
    """The connection closed before any byte of a response came."""


class UpstreamConn(StampedConn):
    """A StampedConn whose reading can be paused and resumed."""

    paused = False

    def pause_reading(self) -> None:
        if not self.paused and not self.closed:
            self.paused = True
            self.loop.remove_reader(self.sock.fileno())

    def resume_reading(self) -> None:
        if self.paused and not self.closed:
            self.paused = False
            self.loop.add_reader(self.sock.fileno(), self._on_readable)


class UpstreamPool:
    """Keep-alive connections to one ``host:port`` (on one event loop)."""

    def __init__(self, host: str, port: int, connect_timeout: float, max_idle: int = 64) -> None:
        self.host, self.port = host, port
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        self._idle: list[UpstreamConn] = []
        self.opened = 0  # connections made (for tests and the status line)
        self.closed = False

    async def connect(self) -> UpstreamConn:
        loop = asyncio.get_running_loop()
        try:
            sock = await asyncio.wait_for(
                open_socket(loop, self.host, self.port), self.connect_timeout
            )
        except TimeoutError:
            raise UpstreamError(
                f"connecting to {self.host}:{self.port} timed out after {self.connect_timeout:g} s",
                "timeout",
            ) from None
        except OSError as e:
            why = "connection refused" if isinstance(e, ConnectionRefusedError) else str(e)
            raise UpstreamError(f"cannot connect to {self.host}:{self.port}: {why}") from None
        self.opened += 1
        return UpstreamConn(loop, sock)

    def idle_conn(self) -> UpstreamConn | None:
        """A kept-alive connection that is still open and quiet, or None."""
        while self._idle:
            conn = self._idle.pop()
            conn.idle = False
            if not conn.closed and not conn.parts:
                return conn
            conn.close()
        return None

    def release(self, conn: UpstreamConn) -> None:
        """Keep ``conn`` for the next request (its response was read to its framed end)."""
        if self.closed or conn.closed or conn.paused or len(self._idle) >= self.max_idle:
            conn.close()
            return
        conn._cancel_timer()
        conn.idle = True  # a byte from the server now closes it
        self._idle.append(conn)

    def close(self) -> None:
        self.closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()


async def read_response_head(
    conn: UpstreamConn, timeout: float
) -> tuple[ResponseHead, list[Stamped], int]:
    """The response head (interim 1xx heads skipped), the body bytes that came with it
    (stamped) and the stamp of the read that completed the head. Everything within
    ``timeout`` seconds and :data:`HEAD_LIMIT` bytes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    buf = b""
    got_any = False
    t_last = 0
    while True:
        end = buf.find(b"\r\n\r\n")
        while end < 0:
            if len(buf) > HEAD_LIMIT:
                raise UpstreamError("response head longer than 64 KiB", "protocol")
            left = deadline - loop.time()
            try:
                if left <= 0:
                    raise TimeoutError
                parts = await conn.take(left)
            except TimeoutError:
                raise UpstreamError(
                    f"no response within {timeout:g} s (upstream timeout)", "timeout"
                ) from None
            if not parts:
                if not got_any:
                    raise NoResponse("the upstream closed the connection without a response")
                raise UpstreamError("the upstream closed the connection mid-head", "protocol")
            got_any = True
            seen = max(0, len(buf) - 3)
            buf += b"".join(d for _, d in parts)
            t_last = parts[-1][0]
            end = buf.find(b"\r\n\r\n", seen)
        try:
            head = parse_response_head(buf[:end])
        except BadMessage as e:
            raise UpstreamError(f"the upstream sent {e}", "protocol") from None
        rest = buf[end + 4 :]
        if 100 <= head.status < 200 and head.status != 101:
            buf = rest  # an interim response (100 Continue, 103 Early Hints): not passed on
            continue
        if head.status == 101:
            raise UpstreamError("the upstream switched protocols (not proxied)", "protocol")
        return head, ([(t_last, rest)] if rest else []), t_last
