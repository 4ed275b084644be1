"""What every HTTP engine shares above the transport: its server's address and access,
the client, and the wording of every fault as a Failed event.

Timing and the reads themselves live below, in tui/transport (http_io, http1, tcp).
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

import httpx

from tui.core.events import Failed
from tui.engines.base import EngineError, EngineSpec
from tui.transport.access import USER_AGENT, HeaderError, HttpAccess, check_header
from tui.transport.http1 import BodyTooLarge
from tui.transport.http_io import (
    EventStalled,
    HttpTimeouts,
    ResponseHead,
    StallTimeout,
    error_message_from_body,
)


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


ANTHROPIC_VERSION = "2023-06-01"  # the Messages API's version header (its only one)


def request_headers(spec: EngineSpec, api_key: str | None) -> dict[str, str]:
    """Headers sent with every request: User-Agent, the spec's own, the API key
    (``Authorization: Bearer``; Anthropic's API: ``x-api-key`` and its
    ``anthropic-version``). EngineError for a header that cannot be sent (CR/LF in it:
    header injection)."""
    headers = {"User-Agent": USER_AGENT}
    if spec.kind == "anthropic":
        headers["anthropic-version"] = ANTHROPIC_VERSION
    headers.update(spec.headers)
    if api_key and spec.kind == "anthropic":
        headers["x-api-key"] = api_key
    elif api_key:
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
    # Redirects are not followed, so a plain http:// server never needs TLS: no context
    # (loading the CA bundle was a tenth of a short bench's start-up CPU).
    plain = (spec.url or "").lower().startswith("http://")
    return httpx.AsyncClient(
        headers=access.headers,
        verify=access.verify_tls and not plain,
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
    if isinstance(exc, EventStalled):
        return Failed(
            now,
            f"{host} kept one streamed event unfinished for over {timeouts.stall:g} s "
            "(stall timeout): the server drips bytes without ending the event",
            "timeout",
        )
    if isinstance(exc, StallTimeout):
        return Failed(
            now,
            f"{host} stopped sending: no data for {timeouts.stall:g} s (stall timeout)",
            "timeout",
        )
    if isinstance(exc, BodyTooLarge):
        return Failed(now, f"{host} sent {exc}: refused", "protocol")
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
