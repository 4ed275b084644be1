"""An upstream that answers with exact bytes, on a schedule: the control for a proxy.

Each request (head, then a Content-Length body) is kept as raw bytes; the answer is a
*script* — ``[(seconds to wait, bytes to send), ...]`` — chosen by a function of the raw
request, each piece sent with one ``sendall`` and the ``time.perf_counter_ns()`` after it
kept (``sent_ns``: the same clock as the proxy's stamps). A piece of :data:`CLOSE` closes
the connection (an answer cut short, or a close-delimited body's end); :data:`HANG` keeps
it open, silent, until the test ends. Standard library only, blocking sockets, one thread
per connection.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CLOSE = b"<close>"
HANG = b"<hang>"
Script = list[tuple[float, bytes]]


def read_request(conn: socket.socket) -> bytes | None:
    """One request's raw bytes (head and Content-Length body), or None at EOF."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            n = int(value.strip())
    while len(rest) < n:
        data = conn.recv(65536)
        if not data:
            break
        rest += data
    return head + b"\r\n\r\n" + rest


@dataclass
class Exchange:
    """One request as the upstream read it, and when it sent each piece of its answer."""

    request: bytes
    t_read_ns: int  # perf_counter_ns when the whole request had been read
    sent_ns: list[int] = field(default_factory=list)
    done: bool = False  # every piece of the script was sent


class ScriptedUpstream:
    def __init__(self, script: Callable[[bytes], Script]) -> None:
        self.script = script
        self.exchanges: list[Exchange] = []
        self.connections = 0
        self.closed_by_peer = threading.Event()  # a send failed: the proxy went away
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # closed by close() before this thread ran
            return
        try:
            while not self._stop.is_set():
                req = read_request(conn)
                if req is None:
                    return
                ex = Exchange(req, time.perf_counter_ns())
                self.exchanges.append(ex)
                stamps = ex.sent_ns
                for wait, piece in self.script(req):
                    if wait:
                        time.sleep(wait)
                    if piece == CLOSE:
                        return
                    if piece == HANG:
                        self._stop.wait()
                        return
                    try:
                        conn.sendall(piece)
                    except OSError:
                        self.closed_by_peer.set()
                        return
                    stamps.append(time.perf_counter_ns())
                ex.done = True
        except OSError:
            return
        finally:
            conn.close()

    @property
    def requests(self) -> list[bytes]:
        return [e.request for e in self.exchanges]

    @property
    def sent_ns(self) -> list[list[int]]:
        return [e.sent_ns for e in self.exchanges]

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass


def chunked(*parts: bytes) -> bytes:
    """``parts`` as chunked framing, with the last chunk."""
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def sse_head(extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Upstream-Case: Kept\r\n"
        + extra
        + b"Transfer-Encoding: chunked\r\n\r\n"
    )
