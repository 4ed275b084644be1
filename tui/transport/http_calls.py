"""An engine's HTTP calls through either client: the lean HTTP/1.1 client where it serves
(plain ``http://``: tui/transport/http1.py), httpx for the rest (https, proxies,
credentials in the URL). Same faults (httpx's exception types) and timeouts either way.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from tui.transport.http1 import Http1Pool, Http1Response, OnPart
from tui.transport.http_io import (
    ERROR_BODY_LIMIT,
    WHOLE_BODY_LIMIT,
    HttpTimeouts,
    WholeResponse,
    read_error_body,
    stamped_body,
)
from tui.transport.whole import fetch_whole_async

KERNEL_STAMPS = "kernel receive time (SO_TIMESTAMPNS)"
READ_STAMPS = "time the read returned (no kernel receive stamps on this socket)"
HTTPX_STAMPS = "time the read returned (httpx: https, a proxy, or credentials in the URL)"


def stamp_source(resp: httpx.Response | Http1Response) -> str:
    """How the body bytes of ``resp`` are stamped, in words for logs and reports."""
    if isinstance(resp, Http1Response):
        return KERNEL_STAMPS if resp.kernel_stamps else READ_STAMPS
    return HTTPX_STAMPS


async def read_stamped(
    resp: httpx.Response | Http1Response, timeouts: HttpTimeouts, on_part: OnPart
) -> None:
    """Each part of the body, with its arrival stamp, to ``on_part`` until it returns True
    or the body ends; from either client, with the timeouts and faults of
    :meth:`Http1Response.stamped_body` / :func:`~tui.transport.http_io.stamped_body`.

    The lean client calls ``on_part`` from the socket's read callback
    (:meth:`Http1Response.push_body`); httpx's parts are pulled one by one.
    """
    if isinstance(resp, Http1Response):
        await resp.push_body(timeouts, on_part)
        return
    body = stamped_body(resp, timeouts)
    try:
        async for t_ns, part in body:
            if on_part(t_ns, part):
                return
    finally:
        await body.aclose()  # type: ignore[attr-defined]


def json_payload(body: object) -> bytes:
    """A request body as compact UTF-8 JSON (ValueError for NaN or infinity)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def post_json(
    client: httpx.AsyncClient | None,
    pool: Http1Pool | None,
    url: str,
    body: object,
    extra: dict[str, str] | None = None,
) -> httpx.Response | Http1Response:
    """POST ``body`` as JSON for a streamed answer: through ``pool`` when there is one,
    else through ``client``. ``extra``: more header fields for this request alone (a
    ``traceparent``)."""
    payload = json_payload(body)
    if pool is not None:
        return await pool.post(url, payload, "application/json", extra)
    assert client is not None, "post_json needs a pool or a client"
    headers = {"Content-Type": "application/json", **(extra or {})}
    req = client.build_request("POST", url, content=payload, headers=headers)
    return await client.send(req, stream=True)


async def fetch_whole(
    client: httpx.AsyncClient | None,
    pool: Http1Pool | None,
    method: str,
    url: str,
    body: object,
    timeouts: HttpTimeouts,
) -> WholeResponse:
    """One request read to its end (``body``: JSON, or None for none), through ``pool``
    when there is one, else through ``client``: at most WHOLE_BODY_LIMIT bytes, all of
    it within :attr:`HttpTimeouts.whole` seconds (a server that drips the answer ends
    as a ReadTimeout). Transport faults raise."""
    payload = None if body is None else json_payload(body)
    deadline = timeouts.whole
    if pool is not None:
        ctype = "application/json" if payload is not None else ""

        async def run() -> WholeResponse:
            assert pool is not None
            resp = await pool.request(method, url, payload, ctype)
            try:
                content = await resp.read_all(timeouts, WHOLE_BODY_LIMIT)
            finally:
                await resp.aclose()
            return WholeResponse(resp.status_code, resp.reason_phrase, resp.headers, content)

        try:
            return await asyncio.wait_for(run(), deadline)
        except asyncio.TimeoutError:
            raise httpx.ReadTimeout(
                f"the whole response did not come within {deadline:g} s"
            ) from None
    assert client is not None, "fetch_whole needs a pool or a client"
    headers = {"Content-Type": "application/json"} if payload is not None else None
    return await fetch_whole_async(
        client,
        method,
        url,
        content=payload,
        headers=headers,
        limit=WHOLE_BODY_LIMIT,
        deadline_s=deadline,
    )


async def error_body(resp: httpx.Response | Http1Response, timeouts: HttpTimeouts) -> bytes:
    """The start of an error or unexpected body, from either client: at most
    ERROR_BODY_LIMIT bytes, read for at most :attr:`HttpTimeouts.whole` seconds (what
    came by then is kept: a dripped error page does not hold the stream up)."""
    parts: list[bytes] = []

    async def run() -> None:  # the parts collect in ``parts`` as they come
        if isinstance(resp, Http1Response):
            await resp.aread(ERROR_BODY_LIMIT, timeouts, into=parts)
        else:
            await read_error_body(resp, timeouts.stall, into=parts)

    try:
        await asyncio.wait_for(run(), timeouts.whole)
    except asyncio.TimeoutError:
        pass
    return b"".join(parts)[:ERROR_BODY_LIMIT]
