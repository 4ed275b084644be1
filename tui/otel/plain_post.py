"""OTLP's POST to a plain ``http://`` collector, on one kept-alive socket: a transport for
the OpenTelemetry SDK's own HTTP client.

The SDK's exporters send through ``requests``; a POST costs ~0.7 ms of the export thread
(``benchmarks/otel_post.py``), a quarter of it ``requests`` reading proxy and netrc
settings from the environment on every call. When a batch carries few requests (a proxy
with a few short answers every 5 s) that is most of what export costs. This transport
does the same POST for ~0.15 ms. It is only the transport: the SDK's client
(``_OTLPHTTPClient``) still builds the headers (``OTEL_EXPORTER_OTLP_*_HEADERS``),
compresses, retries (connection errors once at once, 429/502/503/504 with back-off and
Retry-After) and keeps the deadline; this sends the bytes and reads the answer.

Where it is used (:func:`use_plain_post`): where infertop's own HTTP client takes its fast
path (tui/transport/http1.py ``fast_path_ok``: plain ``http://``, no credentials in the
URL, no proxy from the environment — ``HTTP_PROXY``/``ALL_PROXY`` less ``NO_PROXY``), in
an SDK whose client has the transport slot. Anything else —
``https`` (certificates, client keys), a proxy, another SDK — keeps the SDK's transport.

The collector is untrusted: one deadline for the whole exchange (connect, send, head,
body; a head dripped a byte at a time still ends then), a head of at most
:data:`~tui.transport.http_head.HEAD_LIMIT` bytes parsed by the one strict parser
(tui/transport/http_head.py), a body kept to :data:`BODY_KEPT` bytes (past it the
connection is closed, not read on), and no header name or value with CR, LF or NUL sent
(``OTEL_EXPORTER_OTLP_HEADERS`` is URL-decoded: ``%0D%0A`` would split the request).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from tui.transport.http1 import fast_path_ok
from tui.transport.http_errors import ProtocolError
from tui.transport.http_head import HEAD_LIMIT, framing_for, parse_response_head

BODY_KEPT: Final = 64 * 1024  # bytes of a response body kept (an OTLP answer is small)
READ_SIZE: Final = 64 * 1024
DEFAULT_TIMEOUT_S: Final = 10.0
_BAD_IN_HEADER: Final = ("\r", "\n", "\0")


class HeaderRefused(ValueError):
    """A header name or value that would change the request's framing."""


@dataclass(frozen=True)
class PostResult:
    """What the SDK's client reads of an answer (its ``BaseHTTPResult``): the status and
    reason, or the error that kept an answer from coming."""

    status_code: int | None = None
    reason: str | None = None
    error: Exception | None = None
    body: bytes = b""
    fields: dict[str, str] = field(default_factory=dict)  # lower-case names

    def content(self) -> bytes:
        return self.body

    def headers(self) -> Mapping[str, str]:
        return self.fields

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def _request_bytes(host: str, target: str, headers: Mapping[str, str], body: bytes) -> bytes:
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers.items():
        if any(c in name or c in value for c in _BAD_IN_HEADER) or ":" in name:
            raise HeaderRefused(f"header {name[:40]!r}: CR, LF, NUL or ':' in it, not sent")
        if name.lower() not in ("host", "content-length", "transfer-encoding", "connection"):
            lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class PlainPost:
    """POSTs to one ``http://host:port/path`` endpoint (the SDK transport's interface:
    ``request``, ``is_connection_error``, ``close``)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not a plain http:// endpoint: {url!r}")
        self.url = url
        self.address = (parts.hostname, parts.port or 80)
        self.host = parts.netloc
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._sock: socket.socket | None = None

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        data: bytes | None = None,
    ) -> PostResult:
        """One POST of ``data`` to the endpoint, answered or failed within ``timeout``."""
        deadline = time.monotonic() + (DEFAULT_TIMEOUT_S if timeout is None else timeout)
        try:
            if method != "POST" or url != self.url:
                raise ValueError(f"this transport POSTs to {self.url} only")
            payload = _request_bytes(self.host, self.target, headers or {}, data or b"")
            return self._exchange(payload, deadline)
        except (OSError, ProtocolError, ValueError) as e:
            self.close()
            return PostResult(error=e)

    def _connected(self, deadline: float) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection(self.address, timeout=_left(deadline))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self._sock

    def _exchange(self, payload: bytes, deadline: float) -> PostResult:
        sock = self._connected(deadline)
        sock.settimeout(_left(deadline))
        sock.sendall(payload)
        buf, searched = bytearray(), 0  # grown in place: a head in 1-byte reads is linear
        while True:  # the head; interim 1xx heads skipped
            end = buf.find(b"\r\n\r\n", max(0, searched - 3), HEAD_LIMIT)
            if end < 0 or end + 4 > HEAD_LIMIT:
                if len(buf) >= HEAD_LIMIT:
                    raise ProtocolError(f"a response head over {HEAD_LIMIT} bytes")
                searched = len(buf)  # each byte looked at once: linear in the head
                buf += _recv(sock, deadline, "the answer's head")
                continue
            head = parse_response_head(bytes(buf[:end]))
            del buf[: end + 4]
            searched = 0
            if 100 <= head.status < 200 and head.status != 101:
                continue
            break
        framing, length = framing_for(head, "POST")
        deframer = framing.deframer(length)
        body = deframer.feed(bytes(buf)) if buf else b""
        while not deframer.done and len(body) <= BODY_KEPT:
            data = _recv(sock, deadline, "the answer's body", eof_ok=True)
            if not data:
                break  # closed: the end of an until-close body (or a cut one: kept as is)
            body += deframer.feed(data)
        if not (deframer.done and not deframer.extra and head.keep_alive):
            self.close()
        fields = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
        return PostResult(head.status, head.reason, None, body[:BODY_KEPT], fields)

    def is_connection_error(self, exception: Exception | None) -> bool:
        """Whether the SDK may retry: the connection failed or timed out (OSError); a
        refused header or a malformed answer is no reason to try again."""
        return isinstance(exception, OSError)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the collector did not answer in time")
    return left


def _recv(sock: socket.socket, deadline: float, what: str, eof_ok: bool = False) -> bytes:
    sock.settimeout(_left(deadline))
    data = sock.recv(READ_SIZE)
    if not data and not eof_ok:
        raise ConnectionResetError(f"the collector closed the connection before {what}")
    return data


def use_plain_post(exporter: Any) -> bool:
    """Puts a :class:`PlainPost` in the SDK exporter's client where it serves (see the
    module docstring); True when it did."""
    client = getattr(exporter, "_client", None)
    url = getattr(client, "_endpoint", None)
    old = getattr(client, "_transport", None)
    if client is None or old is None or not isinstance(url, str) or not fast_path_ok(url):
        return False
    try:
        plain = PlainPost(url)
    except ValueError:
        return False
    client._transport = plain
    close = getattr(old, "close", None)
    if callable(close):
        close()
    return True


def post_said(url: str = "http://127.0.0.1:4318/v1/traces") -> str:
    """For ``infertop doctor``: which POST a collector at ``url`` gets with this SDK and
    this environment's proxy settings, in words."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter: Any = OTLPSpanExporter(endpoint=url)
        plain = use_plain_post(exporter)
        exporter.shutdown()
    except Exception as e:  # noqa: BLE001 - a doctor's line, never a crash
        return f"could not tell: {type(e).__name__}: {e}"
    if plain:
        return f"{url}: infertop's POST (https or a proxy: the SDK's requests)"
    if not fast_path_ok(url):
        return (
            f"{url}: the SDK's requests (not plain http://, credentials in it, or a proxy "
            "from the environment applies)"
        )
    return f"{url}: the SDK's requests (this exporter has no transport slot)"
