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


class FrameReader:
    """Reads whole frames from a blocking socket, buffering what one recv brings."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = bytearray()

    def read(self) -> tuple[Any, ...]:
        """The next message; raises :class:`WireClosed` at end of stream."""
        while True:
            if len(self._buf) >= _LEN.size:
                (size,) = _LEN.unpack_from(self._buf)
                if size > MAX_FRAME:
                    raise WireClosed(f"frame of {size} bytes: the stream is corrupt")
                end = _LEN.size + size
                if len(self._buf) >= end:
                    body = bytes(self._buf[_LEN.size : end])
                    del self._buf[:end]
                    message: tuple[Any, ...] = pickle.loads(body)
                    return message
            try:
                data = self._sock.recv(1 << 16)
            except OSError as e:
                raise WireClosed(str(e)) from None
            if not data:
                raise WireClosed("end of stream")
            self._buf += data
