"""HTTP/1.1 message heads as the proxy reads and writes them: parsed strictly, kept raw.

Both sides are untrusted: a client may send anything, and so may the upstream. A head
is at most :data:`HEAD_LIMIT` bytes and :data:`MAX_HEADERS` fields; names are RFC 9110
tokens, values hold no CR, LF or NUL, a folded line (obs-fold) is refused, and a request
with both Content-Length and Transfer-Encoding is refused (the classic request-smuggling
shape). Headers are kept as the raw ``(name, value)`` bytes the peer sent, in order and
in its case, so what is forwarded is what came, less the hop-by-hop fields
(:data:`HOP_BY_HOP` and every name the Connection field lists, RFC 9110 7.6.1).

The framing is never a peer's to take away: a Connection field listing Content-Length
(which no sender may do: the length is for every recipient) does not remove it, or the
client would get an answer with no length and wait for a close. A response with both
Content-Length and Transfer-Encoding is read by its Transfer-Encoding and passed on
without the Content-Length (RFC 9112 6.3: the intermediary removes it), and its upstream
connection is not kept (such a message "ought to be handled as an error").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tui.transport.http_framing import Chunked

HEAD_LIMIT = 64 * 1024
MAX_HEADERS = 100
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_METHOD = re.compile(rb"[A-Z]{1,20}")
_TARGET = re.compile(rb"/[\x21-\x7e]*")  # origin-form: no spaces, no controls, ASCII
_STATUS = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: ([^\r\n]*))?")
_LENGTH = re.compile(rb"[0-9]{1,19}")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")

Headers = list[tuple[bytes, bytes]]


class BadMessage(ValueError):
    """A head that is not HTTP/1.1 as the proxy accepts it (the reason, for a 400 or a
    502 and the request's row)."""


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
        tokens = connection_tokens(self.headers)
        if self.version == "HTTP/1.0":
            return b"keep-alive" in tokens
        return b"close" not in tokens


@dataclass
class ResponseHead:
    """An upstream's response head: the status line as it came, and its headers."""

    status: int
    status_line: bytes
    headers: Headers
    raw_length: int = 0  # bytes of the head, the blank line included
    extra: dict[str, str] = field(default_factory=dict)

    def get(self, name: bytes) -> bytes | None:
        return header_value(self.headers, name)


class PassChunked(Chunked):
    """Chunked framing that also says how many bytes of the last read came after the
    body's end (a pipelined request, or bytes an upstream should not have sent)."""

    @property
    def leftover(self) -> int:
        return len(self._buf) if self.done else 0


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
        raise BadMessage(f"bad status line {lines[0][:80]!r}")
    return ResponseHead(int(m[1]), lines[0], _fields(lines[1:]), len(head) + 4)


def response_framing(head: ResponseHead, method: str) -> tuple[str, int | None]:
    """How the upstream's body is framed: ("none", 0), ("length", n), ("chunked", None)
    or ("close", None) (RFC 9112 6.3: HEAD, 1xx, 204 and 304 have no body)."""
    if method == "HEAD" or head.status < 200 or head.status in (204, 304):
        return "none", 0
    codings = [v for k, v in head.headers if k.lower() == b"transfer-encoding"]
    if codings:
        _is_chunked(codings)
        return "chunked", None
    lengths = [v for k, v in head.headers if k.lower() == b"content-length"]
    if lengths:
        n = _content_length(lengths)
        return ("length", n) if n else ("none", 0)
    return "close", None


_CONTENT_LENGTH = frozenset({b"content-length"})  # (Transfer-Encoding: hop-by-hop, out)


def end_to_end(headers: Headers, also: frozenset[bytes] = frozenset()) -> Headers:
    """``headers`` less the hop-by-hop ones, the names in Connection (but Content-Length:
    see the module docstring), and ``also``."""
    drop = HOP_BY_HOP | (connection_tokens(headers) - _CONTENT_LENGTH) | also
    return [(k, v) for k, v in headers if k.lower() not in drop]


def both_framings(head: ResponseHead) -> bool:
    """Whether a response has both Content-Length and Transfer-Encoding."""
    names = {k.lower() for k, _ in head.headers}
    return b"content-length" in names and b"transfer-encoding" in names


_REQUEST_DROP = frozenset({b"host", b"content-length", b"expect"})


def upstream_request(req: RequestHead, host: str, body_length: int, prefix: str = "") -> bytes:
    """The request head sent upstream: the client's method and target (after the
    upstream URL's own path, ``prefix``, if it has one), HTTP/1.1, Host set to the
    upstream's (as nginx's default), the end-to-end headers as they came, and the body's
    length (the proxy has read the body whole: a chunked request goes on with a
    Content-Length)."""
    line = f"{req.method} {prefix}{req.target} HTTP/1.1\r\nHost: {host}\r\n"
    out = [line.encode("latin-1")]
    for k, v in end_to_end(req.headers, _REQUEST_DROP):
        out.append(k + b": " + v + b"\r\n")
    if body_length or req.method in ("POST", "PUT", "PATCH"):
        out.append(b"Content-Length: %d\r\n" % body_length)
    out.append(b"\r\n")
    return b"".join(out)


def client_response(head: ResponseHead, framing: str, passthrough: bool, close: bool) -> bytes:
    """The response head sent to the client: the upstream's status line and end-to-end
    headers as they came; ``Transfer-Encoding: chunked`` kept when the chunked body is
    passed through as it came (``passthrough``), ``Connection: close`` when the proxy
    closes the connection after this response; Content-Length out when it came with a
    Transfer-Encoding (RFC 9112 6.3)."""
    out = [head.status_line, b"\r\n"]
    also = _CONTENT_LENGTH if both_framings(head) else frozenset()
    for k, v in end_to_end(head.headers, also):
        out.append(k + b": " + v + b"\r\n")
    if framing == "chunked" and passthrough:
        out.append(b"Transfer-Encoding: chunked\r\n")
    if close:
        out.append(b"Connection: close\r\n")
    out.append(b"\r\n")
    return b"".join(out)


def simple_response(
    status: int, reason: str, body: bytes, content_type: str, close: bool = False
) -> bytes:
    """A whole response of the proxy's own (its routes, its errors)."""
    head = [
        f"HTTP/1.1 {status} {reason}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
    ]
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
