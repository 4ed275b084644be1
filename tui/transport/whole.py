"""Whole responses through httpx (scrapes, probes, Prometheus, an engine's small calls),
bounded in bytes and in time.

httpx's own timeouts are per operation: a server that sends one byte a second never
trips a 2 s read timeout, and ``.content`` reads any size. Here every request has

- an overall deadline: each connect, write and read waits only for the time left until
  it, so the request ends by its deadline, dripped head or body alike. httpcore reads a
  response head in a loop of its own with one timeout for the whole loop, so the sync
  clients made here (:func:`deadline_client`) read their sockets through a stream that
  applies the calling thread's deadline to every single read and write
  (:class:`_DeadlineStream`); the async path runs under ``asyncio.wait_for``;
- a byte cap on the (decoded) body: a bigger body, or a compression bomb, raises
  :class:`BodyTooLarge` once the cap is passed; parts are joined once, at the end.

Faults are httpx's exception types (:class:`httpx.ReadTimeout` for a missed deadline),
so callers word them as they word every transport fault.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpcore
import httpx

from tui.transport.http1 import BodyTooLarge
from tui.transport.http_io import WholeResponse

SCRAPE_LIMIT = 8 * 1024 * 1024  # /metrics, /slots, /props, /api/ps, /v1/models, exporters
PROMETHEUS_LIMIT = 32 * 1024 * 1024  # one query's answer for a fleet of hundreds
_TIMEOUT_KEYS = ("connect", "read", "write", "pool")


class DeadlineTimeouts(dict):  # type: ignore[type-arg]
    """A request's timeout extension whose every value is the time left until ``end``
    (``time.monotonic()``), asked afresh by httpcore before each network operation."""

    def __init__(self, end: float) -> None:
        super().__init__(dict.fromkeys(_TIMEOUT_KEYS, 0.0))
        self.end = end

    def _left(self) -> float:
        return max(0.001, self.end - time.monotonic())

    def get(self, key: Any, default: Any = None) -> Any:
        return self._left() if key in _TIMEOUT_KEYS else default

    def __getitem__(self, key: Any) -> Any:
        if key in _TIMEOUT_KEYS:
            return self._left()
        raise KeyError(key)


_deadline = threading.local()  # .end: time.monotonic() the calling thread's request ends by


def _bounded(timeout: float | None, overdue: type[Exception]) -> float | None:
    """``timeout`` cut to the time left until this thread's deadline (none: unchanged);
    ``overdue`` (an httpcore timeout) once it has passed."""
    end = getattr(_deadline, "end", None)
    if end is None:
        return timeout
    left: float = end - time.monotonic()
    if left <= 0:
        raise overdue("the deadline of the whole response passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection's socket stream; every read and write honours the deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(
            ssl_context, server_hostname, _bounded(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.SyncBackend):
    """httpcore's own sockets, each wrapped in a :class:`_DeadlineStream`."""

    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        if "timeout" in kwargs:
            kwargs["timeout"] = _bounded(kwargs["timeout"], httpcore.ConnectTimeout)
        return _DeadlineStream(super().connect_tcp(*args, **kwargs))


def deadline_client(
    *,
    headers: dict[str, str] | None = None,
    verify: Any = True,
    timeout: float | None = None,
    limits: httpx.Limits | None = None,
) -> httpx.Client:
    """An httpx.Client (redirects off) whose every socket operation also honours the
    deadline :func:`get_whole` sets. Without httpcore's pool internals (another httpx
    version), a plain client: the body is still bounded between reads."""
    transport = httpx.HTTPTransport(verify=verify, limits=limits or httpx.Limits())
    pool = getattr(transport, "_pool", None)
    if isinstance(getattr(pool, "_network_backend", None), httpcore.SyncBackend):
        pool._network_backend = _DeadlineBackend()  # type: ignore[union-attr]
    return httpx.Client(
        headers=headers, timeout=timeout, transport=transport, follow_redirects=False
    )


def _overdue(deadline_s: float) -> httpx.ReadTimeout:
    return httpx.ReadTimeout(f"the whole response did not come within {deadline_s:g} s")


def get_whole(
    client: httpx.Client,
    url: str,
    *,
    limit: int,
    deadline_s: float,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    data: dict[str, str] | None = None,
) -> WholeResponse:
    """One request read to its end within ``deadline_s`` seconds and ``limit`` body
    bytes (blocking; for sampler, fleet and probe threads). With a client from
    :func:`deadline_client` no single read can outlast the deadline; with another, a
    read may (the response head), and the body is checked between reads."""
    end = time.monotonic() + deadline_s
    request = client.build_request(method, url, headers=headers, params=params, data=data)
    request.extensions["timeout"] = DeadlineTimeouts(end)
    before = getattr(_deadline, "end", None)
    _deadline.end = end if before is None else min(before, end)
    try:
        resp = client.send(request, stream=True)
        try:
            parts: list[bytes] = []
            size = 0
            for part in resp.iter_bytes():
                parts.append(part)
                size += len(part)
                if size > limit:
                    raise BodyTooLarge(limit)
                if time.monotonic() > end:
                    raise _overdue(deadline_s)
        finally:
            resp.close()
    finally:
        _deadline.end = before
    return WholeResponse(resp.status_code, resp.reason_phrase, resp.headers, b"".join(parts))


async def fetch_whole_async(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    content: bytes | None,
    headers: dict[str, str] | None,
    limit: int,
    deadline_s: float,
) -> WholeResponse:
    """:func:`get_whole` for an AsyncClient (the reader loop)."""
    end = time.monotonic() + deadline_s
    request = client.build_request(method, url, content=content, headers=headers)
    request.extensions["timeout"] = DeadlineTimeouts(end)

    async def run() -> WholeResponse:
        resp = await client.send(request, stream=True)
        try:
            parts: list[bytes] = []
            size = 0
            async for part in resp.aiter_bytes():
                parts.append(part)
                size += len(part)
                if size > limit:
                    raise BodyTooLarge(limit)
        finally:
            await resp.aclose()
        return WholeResponse(resp.status_code, resp.reason_phrase, resp.headers, b"".join(parts))

    try:
        return await asyncio.wait_for(run(), deadline_s)
    except asyncio.TimeoutError:
        raise _overdue(deadline_s) from None


def json_body(content: bytes) -> Any:
    """``content`` parsed as JSON; ValueError (never RecursionError, never another
    error) for anything that is not JSON this process can hold: deep nesting, an
    integer of thousands of digits, bad UTF-8."""
    try:
        return json.loads(content)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except (ValueError, TypeError) as e:  # JSONDecodeError, int digits limit, UnicodeError
        raise ValueError(f"not JSON: {' '.join(str(e).split())[:120]}") from None
