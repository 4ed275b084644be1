"""HTTP/1.1 message heads, parsed strictly and kept raw: the one parser for infertop's own
client (tui/transport/http1.py) and for ``infertop proxy`` (both of its sides).

Every peer is untrusted: a client may send anything, and so may a server. A head is at
most :data:`HEAD_LIMIT` bytes and :data:`MAX_HEADERS` fields; names are RFC 9110 tokens,
values hold no CR, LF or NUL, a folded line (obs-fold) is refused, and a request with
both Content-Length and Transfer-Encoding is refused (the classic request-smuggling
shape). Headers are kept as the raw ``(name, value)`` bytes the peer sent, in order and
in its case (a proxy forwards what came). A response's body framing follows RFC 9112
6.3 (:func:`framing_for`, a :class:`~tui.transport.http_framing.Framing`): no body for
HEAD, 1xx, 204 and 304; Transfer-Encoding (only ``chunked`` is understood) over
Content-Length; else until the close.

:func:`read_response_head` reads a response head off a kernel-stamped connection within
a deadline and the size limit, skipping interim 1xx heads; each side words its faults
(:class:`HeadReadError`) in its own terms.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from enum import Enum

from tui.transport.http_errors import ProtocolError
from tui.transport.http_framing import Framing
from tui.transport.tcp import Stamped, StampedConn

HEAD_LIMIT = 64 * 1024
MAX_HEADERS = 100
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_METHOD = re.compile(rb"[A-Z]{1,20}")
_TARGET = re.compile(rb"/[\x21-\x7e]*")  # origin-form: no spaces, no controls, ASCII
_STATUS = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n]*))?")
_LENGTH = re.compile(rb"[0-9]{1,19}")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")

Headers = list[tuple[bytes, bytes]]


class BadMessage(ProtocolError, ValueError):
    """A head that is not HTTP/1.1 as infertop accepts it (the reason, in words)."""


@dataclass
class RequestHead:
    """A client's request head: method, target (path and query), version, headers."""

    method: str
    target: str
    version: str  # "HTTP/1.1" or "HTTP/1.0"
    headers: Headers
    content_length: int | None = None
    chunked: bool = False

    @property
    def path(self) -> str:
        """The target without its query (a query may carry an API key: never shown)."""
        return self.target.partition("?")[0]

    def get(self, name: bytes) -> bytes | None:
        """The first field called ``name`` (lower case), or None."""
        return header_value(self.headers, name)

    @property
    def keep_alive(self) -> bool:
        """Whether the client keeps the connection after this exchange."""
        return keeps_alive(self.version == "HTTP/1.0", self.headers)


@dataclass
class ResponseHead:
    """A server's response head: the status line as it came, and its headers."""

    status: int
    status_line: bytes
    headers: Headers
    raw_length: int = 0  # bytes of the head, the blank line included
    extra: dict[str, str] = field(default_factory=dict)

    def get(self, name: bytes) -> bytes | None:
        return header_value(self.headers, name)

    @property
    def http10(self) -> bool:
        return self.status_line.startswith(b"HTTP/1.0")

    @property
    def reason(self) -> str:
        """The reason phrase, as text (latin-1, as the bytes came)."""
        return self.status_line[13:].decode("latin-1")

    @property
    def keep_alive(self) -> bool:
        """Whether the server keeps the connection after this response's body."""
        return keeps_alive(self.http10, self.headers)


def header_value(headers: Headers, name: bytes) -> bytes | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def connection_tokens(headers: Headers) -> set[bytes]:
    """The lower-case options every Connection field lists."""
    out: set[bytes] = set()
    for k, v in headers:
        if k.lower() == b"connection":
            out.update(t.strip().lower() for t in v.split(b",") if t.strip())
    return out


def keeps_alive(http10: bool, headers: Headers) -> bool:
    """HTTP/1.0 keeps a connection only when asked to (``keep-alive``); 1.1 unless told
    ``close``."""
    tokens = connection_tokens(headers)
    return b"keep-alive" in tokens if http10 else b"close" not in tokens


def _fields(lines: list[bytes]) -> Headers:
    if len(lines) > MAX_HEADERS:
        raise BadMessage(f"more than {MAX_HEADERS} header fields")
    out: Headers = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            raise BadMessage("a folded header line (obs-fold)")
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise BadMessage(f"bad header line {line[:60]!r}")
        value = value.strip(b" \t")
        if _BAD_VALUE.search(value):
            raise BadMessage(f"header {name[:40]!r} holds a control character")
        out.append((name, value))
    return out


def _content_length(values: list[bytes]) -> int:
    """Content-Length: decimal digits; several fields (or a list) must all agree."""
    found = {v.strip() for item in values for v in item.split(b",")}
    if len(found) != 1:
        raise BadMessage("conflicting Content-Length values")
    (value,) = found
    if not _LENGTH.fullmatch(value):
        raise BadMessage(f"bad Content-Length {value[:30]!r}")
    return int(value)


def _is_chunked(values: list[bytes]) -> bool:
    """Transfer-Encoding: only ``chunked`` is understood, and it must come last."""
    codings = [c.strip().lower() for v in values for c in v.split(b",") if c.strip()]
    if codings != [b"chunked"]:
        raise BadMessage(f"unsupported Transfer-Encoding {b', '.join(codings)[:60]!r}")
    return True


def parse_request_head(head: bytes) -> RequestHead:
    """The request head ``head`` (up to, not including, the blank line)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise BadMessage(f"bad request line {lines[0][:80]!r}")
    method, target, version = parts
    if not _METHOD.fullmatch(method):
        raise BadMessage(f"bad method {method[:20]!r}")
    if not _TARGET.fullmatch(target):
        raise BadMessage("the request target is not a path (this is a reverse proxy)")
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise BadMessage(f"unsupported version {version[:20]!r}")
    headers = _fields(lines[1:])
    req = RequestHead(method.decode(), target.decode(), version.decode(), headers)
    lengths = [v for k, v in headers if k.lower() == b"content-length"]
    codings = [v for k, v in headers if k.lower() == b"transfer-encoding"]
    if lengths and codings:
        raise BadMessage("both Content-Length and Transfer-Encoding (refused: smuggling)")
    if codings:
        if req.version == "HTTP/1.0":
            raise BadMessage("Transfer-Encoding in an HTTP/1.0 request")
        req.chunked = _is_chunked(codings)
    elif lengths:
        req.content_length = _content_length(lengths)
    return req


def parse_response_head(head: bytes) -> ResponseHead:
    """The response head ``head`` (up to, not including, the blank line)."""
    lines = head.split(b"\r\n")
    m = _STATUS.fullmatch(lines[0])
    if m is None:
        raise BadMessage(f"illegal status line {lines[0][:80]!r}")
    return ResponseHead(int(m[2]), lines[0], _fields(lines[1:]), len(head) + 4)


def framing_for(head: ResponseHead, method: str) -> tuple[Framing, int]:
    """How the body of a response to ``method`` is framed, and its length (a LENGTH
    body's; 0 for the others): RFC 9112 6.3 — HEAD, 1xx, 204 and 304 have none;
    Transfer-Encoding (only ``chunked``; BadMessage for another) over Content-Length
    (0: none); else until the close. The one reading of a response's framing, for
    infertop's client and the proxy."""
    if method == "HEAD" or head.status < 200 or head.status in (204, 304):
        return Framing.NONE, 0
    codings = [v for k, v in head.headers if k.lower() == b"transfer-encoding"]
    if codings:
        _is_chunked(codings)
        return Framing.CHUNKED, 0
    lengths = [v for k, v in head.headers if k.lower() == b"content-length"]
    if lengths:
        n = _content_length(lengths)
        return (Framing.LENGTH, n) if n else (Framing.NONE, 0)
    return Framing.CLOSE, 0


class HeadFault(Enum):
    """How reading a response head failed."""

    TIMEOUT = "timeout"  # none within the deadline
    CLOSED = "closed"  # the connection closed before any byte
    CUT = "cut"  # closed mid-head
    LONG = "long"  # past HEAD_LIMIT
    BAD = "bad"  # not a head as parse_response_head takes it (the message says why)
    SWITCHED = "switched"  # 101: the server switched protocols


class HeadReadError(Exception):
    """Reading a response head failed; ``kind`` says how (:class:`HeadFault`); each side
    words it in its own terms."""

    def __init__(self, kind: HeadFault, message: str = "") -> None:
        super().__init__(message or kind.value)
        self.kind = kind


async def read_response_head(
    conn: StampedConn, timeout: float
) -> tuple[ResponseHead, list[Stamped], int]:
    """The response head on ``conn`` (interim 1xx heads skipped), the body bytes that
    came with it (stamped) and the stamp of the read that completed the head: all
    within ``timeout`` seconds (a head dripped a byte at a time still ends then) and
    :data:`HEAD_LIMIT` bytes, each byte searched once for the head's end."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    buf = bytearray()
    got_any = False
    t_last = 0
    while True:
        end = buf.find(b"\r\n\r\n")
        while end < 0:
            if len(buf) > HEAD_LIMIT:
                raise HeadReadError(HeadFault.LONG, f"response head longer than {HEAD_LIMIT} bytes")
            left = deadline - loop.time()
            try:
                if left <= 0:
                    raise TimeoutError
                parts = await conn.take(left)
            except TimeoutError:
                raise HeadReadError(HeadFault.TIMEOUT) from None
            if not parts:
                raise HeadReadError(HeadFault.CUT if got_any else HeadFault.CLOSED)
            got_any = True
            seen = max(0, len(buf) - 3)  # the head's end may straddle the old bytes
            for _, data in parts:
                buf += data
            t_last = parts[-1][0]
            end = buf.find(b"\r\n\r\n", seen)
        try:
            head = parse_response_head(bytes(buf[:end]))
        except BadMessage as e:
            raise HeadReadError(HeadFault.BAD, str(e)) from None
        rest = bytes(buf[end + 4 :])
        if head.status == 101:
            raise HeadReadError(HeadFault.SWITCHED, "the server switched protocols")
        if 100 <= head.status < 200:
            buf = bytearray(rest)  # an interim response (100 Continue, 103 Early Hints)
            continue
        return head, ([(t_last, rest)] if rest else []), t_last
