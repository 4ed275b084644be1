"""Helpers for the proxy tests: raw exchanges, reading one response, waiting."""

from __future__ import annotations

import socket
import time
import weakref
from collections.abc import Callable


def raw_exchange(url: str, request: bytes, timeout: float = 10.0) -> bytes:
    """Send ``request`` on a fresh connection; everything read until the peer closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request)
        out = b""
        while True:
            data = s.recv(65536)
            if not data:
                return out
            out += data


# Bytes read past the end of a response, per socket: a pipelined answer's next response
# may come in the same read as the one before it (a busy machine reads late).
_LEFTOVER: weakref.WeakKeyDictionary[socket.socket, bytes] = weakref.WeakKeyDictionary()


def read_response(s: socket.socket, timeout: float = 10.0) -> tuple[bytes, bytes]:
    """One response from ``s``: (head, body de-chunked or by length). What was read past
    it is kept for the next call on the same socket."""
    s.settimeout(timeout)
    buf = _LEFTOVER.pop(s, b"")
    while b"\r\n\r\n" not in buf:
        data = s.recv(65536)
        if not data:
            raise AssertionError(f"closed before a head: {buf!r}")
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    if head.split(b" ")[1] in (b"204", b"304"):
        _LEFTOVER[s] = rest
        return head, b""  # no body, whatever the fields say
    low = head.lower()
    if b"transfer-encoding: chunked" in low:
        body = b""
        while True:
            while b"\r\n" not in rest:
                rest += s.recv(65536)
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            while len(rest) < size + 2:
                rest += s.recv(65536)
            body += rest[:size]
            rest = rest[size + 2 :]
            if size == 0:
                _LEFTOVER[s] = rest
                return head, body
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        rest += s.recv(65536)
    _LEFTOVER[s] = rest[n:]
    return head, rest[:n]


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
