"""One bounded GET for the inside readers: the whole body within the time left until a
deadline and :data:`~tui.transport.whole.SCRAPE_LIMIT` bytes, so a dripping or endless
endpoint ends at the deadline (blocking; call from a thread)."""

from __future__ import annotations

import time
from typing import Any

from tui.transport.access import HttpAccess
from tui.transport.prometheus import Scrape, ScrapeError, parse
from tui.transport.whole import SCRAPE_LIMIT, json_body


class InsideError(Exception):
    """A read failed (one-line message: the endpoint and why)."""


def get_body(url: str, access: HttpAccess, end: float, limit: int = SCRAPE_LIMIT) -> bytes:
    """GET ``url``'s whole body by ``end`` (time.monotonic()); InsideError otherwise."""
    import httpx

    from tui.transport.http1 import BodyTooLarge
    from tui.transport.whole import deadline_client, get_whole

    left = end - time.monotonic()
    if left <= 0:
        raise InsideError(f"{url}: no time left for this read")
    try:
        with deadline_client(headers=access.headers, verify=access.verify_tls) as client:
            r = get_whole(client, url, limit=limit, deadline_s=left)
    except BodyTooLarge:
        raise InsideError(f"{url}: more than {limit // 2**20} MiB") from None
    except httpx.HTTPError as e:
        raise InsideError(f"{url}: {type(e).__name__}: {' '.join(str(e).split())[:120]}") from None
    if r.status_code != 200:
        raise InsideError(f"{url}: HTTP {r.status_code}")
    return r.content


def get_scrape(url: str, access: HttpAccess, end: float) -> Scrape:
    body = get_body(url, access, end)
    try:
        return parse(body.decode("utf-8", "replace"))
    except ScrapeError as e:
        raise InsideError(f"{url}: {e}") from None


def get_json(url: str, access: HttpAccess, end: float) -> Any:
    body = get_body(url, access, end)
    try:
        return json_body(body)
    except ValueError as e:
        raise InsideError(f"{url}: {e}") from None
