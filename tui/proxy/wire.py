"""The heads ``infertop proxy`` writes: the request it sends upstream, the answer's head
it passes on, and its own answers. Parsing is tui/transport/http_head.py's (one parser
for infertop's client and the proxy).

What is forwarded is what came, less the hop-by-hop fields (:data:`HOP_BY_HOP` and every
name the Connection field lists, RFC 9110 7.6.1). The framing is never a peer's to take
away: a Connection field listing Content-Length (which no sender may do: the length is
for every recipient) does not remove it, or the client would get an answer with no
length and wait for a close. A response with both Content-Length and Transfer-Encoding
is read by its Transfer-Encoding and passed on without the Content-Length (RFC 9112 6.3:
the intermediary removes it), and its upstream connection is not kept (such a message
"ought to be handled as an error").
"""

from __future__ import annotations

from typing import Any

from tui.transport.http_head import Headers, RequestHead, ResponseHead, connection_tokens

try:
    from orjson import dumps as json_dumps
except ImportError:  # pragma: no cover - a dependency
    import json

    def json_dumps(obj: Any) -> bytes:  # type: ignore[misc]
        return json.dumps(obj).encode()


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


_TRACE_DROP = _REQUEST_DROP | {b"traceparent"}


def upstream_request(
    req: RequestHead,
    host: str,
    body_length: int,
    prefix: str = "",
    traceparent: bytes | None = None,
) -> bytes:
    """The request head sent upstream: the client's method and target (after the
    upstream URL's own path, ``prefix``, if it has one), HTTP/1.1, Host set to the
    upstream's (as nginx's default), the end-to-end headers as they came, and the body's
    length (the proxy has read the body whole: a chunked request goes on with a
    Content-Length). ``traceparent``: sent in place of the client's own (trace
    propagation, tui/proxy/tracing.py)."""
    line = f"{req.method} {prefix}{req.target} HTTP/1.1\r\nHost: {host}\r\n"
    out = [line.encode("latin-1")]
    drop = _REQUEST_DROP if traceparent is None else _TRACE_DROP
    for k, v in end_to_end(req.headers, drop):
        out.append(k + b": " + v + b"\r\n")
    if traceparent is not None:
        out.append(b"traceparent: " + traceparent + b"\r\n")
    if body_length or req.method in ("POST", "PUT", "PATCH"):
        out.append(b"Content-Length: %d\r\n" % body_length)
    out.append(b"\r\n")
    return b"".join(out)


def client_response(head: ResponseHead, chunks_passed: bool, close: bool) -> bytes:
    """The response head sent to the client: the upstream's status line and end-to-end
    headers as they came; ``Transfer-Encoding: chunked`` kept when a chunked body is
    passed through as it came (``chunks_passed``), ``Connection: close`` when the proxy
    closes the connection after this response; Content-Length out when it came with a
    Transfer-Encoding (RFC 9112 6.3)."""
    out = [head.status_line, b"\r\n"]
    also = _CONTENT_LENGTH if both_framings(head) else frozenset()
    for k, v in end_to_end(head.headers, also):
        out.append(k + b": " + v + b"\r\n")
    if chunks_passed:
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


def error_response(status: int, reason: str, message: str, close: bool) -> bytes:
    """The proxy's own error answer (OpenAI-style JSON, so SDKs show the message)."""
    body = json_dumps({"error": {"message": f"infertop proxy: {message}", "type": "proxy"}})
    return simple_response(status, reason, body, "application/json", close)
