"""The wire between infertop and an engine worker process: length-prefixed pickle frames.

Both ends are infertop's own code on one machine, over a socketpair the parent made, so
pickle is safe here. A frame is a 4-byte little-endian length, then one pickled tuple:

parent → worker: ``("load", cid, target, spec)``, ``("stream", rid, request)``,
``("cancel", rid)``, ``("close", cid)``.

worker → parent: ``("reply", cid, ok, payload)`` (payload: ``(load_ms, EngineInfo)`` for
a load, an error message when not ok), ``("events", rid, [event, ...])`` — one batch of
stamped events as the engine handed them over — and ``("info", EngineInfo)``.
"""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

_LEN = struct.Struct("<I")
MAX_FRAME = 1 << 30


class WireClosed(EOFError):
    """The other end is gone (closed its socket or died)."""


def send_frame(sock: socket.socket, message: tuple[Any, ...]) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LEN.pack(len(body)) + body)


class FrameBuffer:
    """Whole messages out of bytes fed in as they arrive."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        """Add ``data``; return every message now complete (raises WireClosed on a
        corrupt length)."""
        buf = self._buf
        buf += data
        out: list[tuple[Any, ...]] = []
        start = 0
        while len(buf) - start >= _LEN.size:
            (size,) = _LEN.unpack_from(buf, start)
            if size > MAX_FRAME:
                raise WireClosed(f"frame of {size} bytes: the stream is corrupt")
            end = start + _LEN.size + size
            if len(buf) < end:
                break
            out.append(pickle.loads(bytes(buf[start + _LEN.size : end])))
            start = end
        if start:
            del buf[:start]
        return out


class FrameReader:
    """Reads whole frames from a blocking socket, buffering what one recv brings."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._frames = FrameBuffer()
        self._ready: list[tuple[Any, ...]] = []

    def read(self) -> tuple[Any, ...]:
        """The next message; raises :class:`WireClosed` at end of stream."""
        while not self._ready:
            try:
                data = self._sock.recv(1 << 16)
            except OSError as e:
                raise WireClosed(str(e)) from None
            if not data:
                raise WireClosed("end of stream")
            self._ready = self._frames.feed(data)
        return self._ready.pop(0)
