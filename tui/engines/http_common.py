"""What every HTTP engine shares: the client, timeouts, error wording.

Honest timing: all HTTP reads run on one daemon thread with its own asyncio loop
(:class:`~tui.engines.reader_loop.HttpReader`). Bytes are stamped with
``time.perf_counter_ns()`` in that loop the moment a read returns (plain http:// streams:
in the protocol's ``data_received``, see tui/engines/http1.py; httpx for the rest), parsed
there into stream events, and handed to the consumer's loop in batches, one cross-thread
wake-up per loop turn. A consumer that is slow to take events (a busy UI frame, a blocking
callback) delays when it *sees* an event, never the stamp the event carries
(tests/http/test_openai_pace.py). One limit remains: a consumer that keeps the CPU busy in
Python holds the GIL, and the reader thread waits up to ``sys.getswitchinterval()`` (5 ms
by default) to stamp; that adds jitter to single gaps, not drift to the mean
(benchmarks/http_consumer_skew.py measures it).

Timeouts (see :class:`HttpTimeouts`): ``connect`` for the TCP/TLS connection, ``read``
for the response to begin (headers and the first body bytes: covers queueing and
prefill), ``stall`` for any gap between body reads after that.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from tui.core.events import Failed
from tui.engines.base import EngineError, EngineSpec
from tui.transport.access import USER_AGENT, HeaderError, HttpAccess, check_header

ERROR_BODY_LIMIT = 64 * 1024


@dataclass(frozen=True)
class HttpTimeouts:
    """Seconds: connect, response start (read), gap between body reads (stall)."""

    connect: float
    read: float
    stall: float

    @classmethod
    def from_spec(cls, spec: EngineSpec) -> HttpTimeouts:
        stall = spec.stall_timeout_s or spec.read_timeout_s
        return cls(spec.connect_timeout_s, spec.read_timeout_s, stall)


def api_key_from_env(spec: EngineSpec) -> str | None:
    """The API key named by ``api_key_env``; EngineError if that variable is unset."""
    if not spec.api_key_env:
        return None
    key = os.environ.get(spec.api_key_env)
    if not key:
        raise EngineError(
            f"engine {spec.name!r}: environment variable {spec.api_key_env} "
            "(api_key_env) is not set"
        )
    return key


def base_url(spec: EngineSpec) -> str:
    """The server's base URL without a trailing slash or a trailing /v1."""
    if not spec.url:
        raise EngineError(f"engine {spec.name!r} ({spec.kind}) needs a url")
    url = spec.url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise EngineError(f"not an http(s) URL: {spec.url!r}")
    return url[:-3] if url.endswith("/v1") else url


def request_headers(spec: EngineSpec, api_key: str | None) -> dict[str, str]:
    """Headers sent with every request: User-Agent, the spec's own, Authorization.
    EngineError for a header that cannot be sent (CR/LF in it: header injection)."""
    headers = {"User-Agent": USER_AGENT}
    headers.update(spec.headers)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    for name, value in headers.items():
        try:
            check_header(name, value)
        except HeaderError as e:
            raise EngineError(f"engine {spec.name!r}: {e}") from None
    return headers


def access_for(spec: EngineSpec) -> HttpAccess:
    """How every request to this engine's server is made — the engine's own, and its
    scrapers' and probes' (api_key_env, headers, verify_tls)."""
    return HttpAccess(request_headers(spec, api_key_from_env(spec)), spec.verify_tls)


def make_client(spec: EngineSpec, access: HttpAccess) -> httpx.AsyncClient:
    """An AsyncClient for the reader loop (create and use it only there)."""
    t = HttpTimeouts.from_spec(spec)
    return httpx.AsyncClient(
        headers=access.headers,
        verify=access.verify_tls,
        timeout=httpx.Timeout(connect=t.connect, read=t.read, write=t.connect, pool=t.read),
        limits=httpx.Limits(max_connections=512, max_keepalive_connections=128),
        follow_redirects=False,
    )


def describe_transport_error(exc: BaseException, url: str, timeouts: HttpTimeouts) -> Failed:
    """A one-line Failed event for a transport-level exception."""
    now = time.perf_counter_ns()
    host = urlsplit(url).netloc
    if isinstance(exc, httpx.ConnectTimeout):
        return Failed(
            now, f"connecting to {host} timed out after {timeouts.connect:g} s", "timeout"
        )
    if isinstance(exc, httpx.ConnectError):
        text = _root_cause_text(exc)
        low = text.lower()
        if (
            "name or service not known" in low
            or "nodename nor servname" in low
            or ("name resolution" in low)
            or "no address associated" in low
            or "getaddrinfo" in low
        ):
            return Failed(now, f"unknown host: {urlsplit(url).hostname} ({text})", "connect")
        if "certificate_verify_failed" in low or "certificate verify failed" in low:
            return Failed(
                now,
                f"TLS certificate of {host} is not trusted ({text}); for a self-signed "
                "server you trust, set verify_tls = false in its engine table, or pass "
                "--insecure with --url",
                "connect",
            )
        if "refused" in low:
            return Failed(now, f"connection refused by {host} (is the server running?)", "connect")
        return Failed(now, f"cannot connect to {host}: {text or type(exc).__name__}", "connect")
    if isinstance(exc, httpx.ReadTimeout | httpx.PoolTimeout):
        return Failed(
            now,
            f"no response from {host} within the read timeout ({timeouts.read:g} s)",
            "timeout",
        )
    if isinstance(exc, StallTimeout):
        return Failed(
            now,
            f"{host} stopped sending: no data for {timeouts.stall:g} s (stall timeout)",
            "timeout",
        )
    if isinstance(exc, httpx.RemoteProtocolError):
        return Failed(now, f"{host} closed the connection mid-response ({exc})", "protocol")
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return Failed(now, f"connection to {host} broke: {exc or type(exc).__name__}", "protocol")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return Failed(now, f"bad URL {url!r}: {exc}", "connect")
    if isinstance(exc, httpx.HTTPError):
        return Failed(now, f"HTTP error talking to {host}: {exc}", "protocol")
    return Failed(now, f"{type(exc).__name__}: {exc}", "engine")


def _root_cause_text(exc: BaseException) -> str:
    """The most specific message in an exception chain (anyio hides the OSError)."""
    texts = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        for sub in getattr(cur, "exceptions", None) or ():  # an exception group
            texts.append(_root_cause_text(sub))
        texts.append(str(cur))
        cur = cur.__cause__ or cur.__context__
    unique = list(dict.fromkeys(t for t in texts if t))
    return "; ".join(unique) or type(exc).__name__


class StallTimeout(Exception):
    """No body bytes for longer than the stall timeout."""


# What reading from a server can raise when the *transport* fails (either client): an
# engine turns these into Failed events with describe_transport_error. Anything else is a
# bug and is left to surface as one.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.HTTPError,
    OSError,
    TimeoutError,
    StallTimeout,
)


def error_message_from_body(body: bytes, content_type: str) -> str:
    """The server's own error text from an error response body (JSON or plain)."""
    text = body.decode("utf-8", errors="replace").strip()
    if "json" in content_type or text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        msg = _find_message(obj)
        if msg:
            return msg
    if "html" in content_type or text.lower().startswith(("<!doctype", "<html")):
        return "(an HTML page, not an API error: is this an LLM server?)"
    return " ".join(text.split())[:300] or "(empty body)"


def _find_message(obj: Any) -> str | None:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        for key in ("error", "message", "detail", "msg"):
            if key in obj:
                found = _find_message(obj[key])
                if found:
                    return found
    if isinstance(obj, list) and obj:
        return _find_message(obj[0])
    return None


async def read_error_body(resp: httpx.Response, stall: float) -> bytes:
    data = b""
    try:
        async for part in _with_stall(resp.aiter_raw(), stall):
            data += part
            if len(data) >= ERROR_BODY_LIMIT:
                break
    except (httpx.HTTPError, StallTimeout):
        pass
    return data


class ResponseHead(Protocol):
    """What the error wording needs of a response (httpx's or http1's)."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...


def http_status_failure(resp: ResponseHead, body: bytes) -> Failed:
    msg = error_message_from_body(body, resp.headers.get("content-type", ""))
    return Failed(
        time.perf_counter_ns(), f"HTTP {resp.status_code} {resp.reason_phrase}: {msg}", "http"
    )


def wrong_content_failure(base: str, resp: ResponseHead, body: bytes, expected: str) -> Failed:
    """A 2xx answer that is not the streaming format asked for (e.g. a web page)."""
    ctype = resp.headers.get("content-type", "") or "no content type"
    return Failed(
        time.perf_counter_ns(),
        f"{base} answered {resp.status_code} with {ctype}, not {expected}: "
        f"{error_message_from_body(body, ctype)}",
        "protocol",
    )


async def _with_stall(it: AsyncIterator[bytes], stall: float) -> AsyncIterator[bytes]:
    """Re-yield ``it``, raising StallTimeout when one read waits longer than ``stall``."""
    while True:
        try:
            part = await asyncio.wait_for(it.__anext__(), stall)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise StallTimeout() from None
        yield part


async def stamped_body(
    resp: httpx.Response, timeouts: HttpTimeouts
) -> AsyncIterator[tuple[int, bytes]]:
    """Body bytes as they arrive, each with the perf_counter_ns of its arrival.

    The first read may wait ``timeouts.read`` (a server can send headers before it has
    prefilled); every later read may wait ``timeouts.stall``.
    """
    it = resp.aiter_bytes()
    first = True
    while True:
        try:
            part = await asyncio.wait_for(
                it.__anext__(), timeouts.read if first else timeouts.stall
            )
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            if first:
                raise httpx.ReadTimeout("no body within the read timeout") from None
            raise StallTimeout() from None
        t = time.perf_counter_ns()
        first = False
        if part:
            yield t, part
