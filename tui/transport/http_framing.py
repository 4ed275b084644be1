"""How an HTTP/1.1 body is framed (:class:`Framing`, one per message: the head says which,
tui/transport/http_head.py ``framing_for``), and the readers that take its framing off,
fed bytes in arbitrary pieces (:meth:`Framing.deframer`: the one place a framing becomes
a reader, for infertop's client and the proxy alike).

Each reader's ``feed`` returns the body bytes found so far; ``done`` says the body ended;
``extra`` that bytes followed its end (then the connection cannot be reused).
"""

from __future__ import annotations

import re
from enum import Enum

from tui.transport.http_errors import FramingError

LINE_LIMIT = 4096  # bytes in a chunk-size or trailer line, CRLF not counted

# RFC 9112 7.1: chunk-size is 1*HEXDIG (here at most 16: under 2**64), then extensions,
# each after optional whitespace and a ";" (ignored), then optional whitespace (as h11).
# Python's int(x, 16) alone would also take "-5", "+5", " 5", "1_0" and "0x5".
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_HEX_DIGITS = b"0123456789abcdefABCDEF"  # bytes.strip(_HEX_DIGITS) is b"" for hex alone


class Framing(Enum):
    """How a message's body is framed (RFC 9112 6.3)."""

    NONE = "none"  # no body: HEAD, 1xx, 204, 304, Content-Length: 0
    LENGTH = "length"  # Content-Length bytes
    CHUNKED = "chunked"  # Transfer-Encoding: chunked
    CLOSE = "close"  # until the connection closes (then it cannot be kept)

    def deframer(self, length: int = 0) -> Deframer:
        """The reader of a body so framed (``length``: a LENGTH body's)."""
        if self is Framing.CHUNKED:
            return Chunked()
        if self is Framing.CLOSE:
            return UntilClose()
        return Sized(length if self is Framing.LENGTH else 0)


class Deframer:
    """Takes a body's framing off, fed in pieces (see the module docstring)."""

    done = False
    extra = False  # bytes after the end of the body (the connection cannot be reused)

    def feed(self, data: bytes) -> bytes:
        raise NotImplementedError


class UntilClose(Deframer):
    def feed(self, data: bytes) -> bytes:
        return data


class Sized(Deframer):
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


class Chunked(Deframer):
    """Transfer-Encoding: chunked, fed in arbitrary pieces (chunk extensions ignored,
    trailers skipped). A chunk that is whole in the buffer is taken in one step."""

    @property
    def leftover(self) -> int:
        """How many bytes of the last piece came after the body's end (a pipelined
        request, or bytes an upstream should not have sent)."""
        return len(self._buf) if self.done else 0

    def __init__(self) -> None:
        self._buf = b""
        self._left = 0  # data bytes still due in the current chunk
        self._crlf = False  # the CRLF after a chunk's data is due
        self._trailers = False
        self._idle = True  # none of the above: the next bytes start a chunk-size line

    def feed(self, data: bytes) -> bytes:
        if self._idle:  # between chunks, nothing held
            eol = data.find(b"\r\n")
            if 0 < eol <= 16:
                line = data[:eol]
                if not line.strip(_HEX_DIGITS):  # the size alone, 1 to 16 hex digits
                    start = eol + 2
                    end = start + int(line, 16)
                    if end + 2 == len(data) and end > start and data.endswith(b"\r\n"):
                        return data[start:end]  # exactly one whole chunk: a token per read
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
                _check_line_length(buf, pos, n - 1, "chunk size")
                break
            if _HEX.fullmatch(buf, pos, eol):  # the usual line: the size alone
                size = int(buf[pos:eol], 16)
            else:
                size = _chunk_size(buf, pos, eol)
            pos = eol + 2
            if size == 0:
                self._trailers = True
                continue
            end = pos + size
            if buf[end : end + 2] == b"\r\n":  # the whole chunk is here
                out.append(buf[pos:end])
                pos = end + 2
            else:
                self._left = size
        self._buf = buf[pos:]
        self._idle = not (self._buf or self._left or self._crlf or self._trailers)
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
                raise FramingError(
                    f"bad chunk end: {buf[pos : pos + 2]!r} after the chunk's data, not CRLF"
                )
            self._crlf = False
            return pos + 2
        eol = buf.find(b"\r\n", pos)  # a trailer line; a blank one ends the body
        if eol < 0:
            _check_line_length(buf, pos, n - 1, "trailer")
            return -pos - 1
        _check_line_length(buf, pos, eol, "trailer")
        self.done = eol == pos
        return eol + 2


def _chunk_size(buf: bytes, pos: int, eol: int) -> int:
    """The size on the chunk-size line ``buf[pos:eol]`` (extensions ignored);
    FramingError naming the line unless it is 1 to 16 hex digits."""
    _check_line_length(buf, pos, eol, "chunk size")
    m = _SIZE_LINE.fullmatch(buf, pos, eol)
    if m is None:
        raise FramingError(f"bad chunk size line {buf[pos:eol][:40]!r}")
    return int(m[1], 16)


def _check_line_length(buf: bytes, pos: int, end: int, what: str) -> None:
    """FramingError when the line from ``pos`` runs past LINE_LIMIT before ``end``
    (a peer that never ends a line would otherwise fill the buffer)."""
    if end - pos > LINE_LIMIT:
        raise FramingError(
            f"{what} line longer than {LINE_LIMIT} bytes: {buf[pos : pos + 40]!r}..."
        )
