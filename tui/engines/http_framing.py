"""Body framings of HTTP/1.1 responses, fed bytes in arbitrary pieces (tui/engines/http1.py).

Each ``feed`` returns the body bytes found so far; ``done`` says the body ended; ``extra``
that bytes followed its end (then the connection cannot be reused).
"""

from __future__ import annotations

import httpx


class Framing:
    done = False
    extra = False  # bytes after the end of the body (the connection cannot be reused)

    def feed(self, data: bytes) -> bytes:
        raise NotImplementedError


class UntilClose(Framing):
    def feed(self, data: bytes) -> bytes:
        return data


class Sized(Framing):
    def __init__(self, n: int) -> None:
        self.left = n
        self.done = n == 0

    def feed(self, data: bytes) -> bytes:
        if len(data) >= self.left:
            self.extra = len(data) > self.left
            data, self.left, self.done = data[: self.left], 0, True
        else:
            self.left -= len(data)
        return data


class Chunked(Framing):
    """Transfer-Encoding: chunked, fed in arbitrary pieces (chunk extensions ignored,
    trailers skipped). A chunk that is whole in the buffer is taken in one step."""

    def __init__(self) -> None:
        self._buf = b""
        self._left = 0  # data bytes still due in the current chunk
        self._crlf = False  # the CRLF after a chunk's data is due
        self._trailers = False

    def feed(self, data: bytes) -> bytes:
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos, n = 0, len(buf)
        while pos < n:
            if self._left or self._crlf or self._trailers:
                pos = self._slow(buf, pos, out)
                if pos < 0 or self.done:
                    pos = -pos - 1 if pos < 0 else pos
                    break
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            try:
                size = int(buf[pos:eol], 16)
            except ValueError:
                size = _chunk_size(buf[pos:eol])
            pos = eol + 2
            if size <= 0:
                self._trailers = True
                continue
            end = pos + size
            if buf[end : end + 2] == b"\r\n":  # the whole chunk is here
                out.append(buf[pos:end])
                pos = end + 2
            else:
                self._left = size
        self._buf = buf[pos:]
        self.extra = self.done and pos < n
        return out[0] if len(out) == 1 else b"".join(out)

    def _slow(self, buf: bytes, pos: int, out: list[bytes]) -> int:
        """A chunk split across reads, its CRLF, or the trailers: the new position, or
        ``-pos - 1`` when more bytes are needed."""
        n = len(buf)
        if self._left:
            take = min(self._left, n - pos)
            out.append(buf[pos : pos + take])
            self._left -= take
            self._crlf = self._left == 0
            return pos + take
        if self._crlf:
            if n - pos < 2:
                return -pos - 1
            if buf[pos : pos + 2] != b"\r\n":
                raise httpx.RemoteProtocolError("bad chunk end")
            self._crlf = False
            return pos + 2
        eol = buf.find(b"\r\n", pos)  # a trailer line; a blank one ends the body
        if eol < 0:
            return -pos - 1
        self.done = eol == pos
        return eol + 2


def _chunk_size(line: bytes) -> int:
    """A chunk-size line with an extension (``1a;name=value``), or a bad one."""
    try:
        return int(line.partition(b";")[0], 16)
    except ValueError:
        raise httpx.RemoteProtocolError(f"bad chunk size {line[:40]!r}") from None
