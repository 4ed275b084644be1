"""Connections to the upstream server: kernel-stamped reads, keep-alive, pausing.

Each connection is a :class:`~tui.transport.tcp.StampedConn` (every read carries the
kernel's receive time where the socket gives it, else the time the read returned) that
can also stop reading for a while (:meth:`UpstreamConn.pause_reading`): when a client
reads slower than its upstream writes, the proxy stops reading that one upstream socket
instead of buffering without end, and TCP flow control slows that one stream only.
"""

from __future__ import annotations

import asyncio
from enum import Enum

from tui.transport.http_head import HEAD_LIMIT, HeadFault, HeadReadError, ResponseHead
from tui.transport.http_head import read_response_head as read_head
from tui.transport.tcp import Stamped, StampedConn, open_socket


class UpstreamFault(Enum):
    """How the upstream failed to answer."""

    CONNECT = "connect"  # it could not be reached, or closed before answering
    TIMEOUT = "timeout"  # it was silent past the timeout (504)
    PROTOCOL = "protocol"  # what it sent is no HTTP answer the proxy can pass on


class UpstreamError(Exception):
    """The upstream could not be reached or did not answer as HTTP (one line: why)."""

    def __init__(self, message: str, kind: UpstreamFault = UpstreamFault.CONNECT) -> None:
        super().__init__(message)
        self.kind = kind


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
                UpstreamFault.TIMEOUT,
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
            if conn.unpark():
                return conn
        return None

    def release(self, conn: UpstreamConn) -> None:
        """Keep ``conn`` for the next request (its response was read to its framed end)."""
        if self.closed or conn.closed or conn.paused or len(self._idle) >= self.max_idle:
            conn.close()
            return
        conn.park()  # (a byte from the server now closes it)
        self._idle.append(conn)

    def close(self) -> None:
        self.closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()


async def read_response_head(
    conn: UpstreamConn, timeout: float
) -> tuple[ResponseHead, list[Stamped], int]:
    """:func:`tui.transport.http_head.read_response_head`, its faults as
    :class:`UpstreamError` (:class:`NoResponse`: closed before any byte)."""
    try:
        return await read_head(conn, timeout)
    except HeadReadError as e:
        if e.kind is HeadFault.CLOSED:
            raise NoResponse("the upstream closed the connection without a response") from None
        if e.kind is HeadFault.TIMEOUT:
            why = f"no response within {timeout:g} s (upstream timeout)"
            raise UpstreamError(why, UpstreamFault.TIMEOUT) from None
        why = {
            HeadFault.CUT: "the upstream closed the connection mid-head",
            HeadFault.LONG: f"response head longer than {HEAD_LIMIT // 1024} KiB",
            HeadFault.SWITCHED: "the upstream switched protocols (not proxied)",
        }.get(e.kind, f"the upstream sent {e}")
        raise UpstreamError(why, UpstreamFault.PROTOCOL) from None
