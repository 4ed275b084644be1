"""Bounded GETs for the inside readers: each whole body within the time left until a
deadline and :data:`~tui.transport.whole.SCRAPE_LIMIT` bytes, so a dripping or endless
endpoint ends at the deadline (blocking; call from one thread at a time).

One :class:`Fetcher` per reader keeps one HTTP client (and its kept-alive connection)
for every read: building a client (its TLS context) for each GET cost ~20 ms of CPU, a
few per cent of a core at one read a second — taken from the engine it watches."""

from __future__ import annotations

import time
from typing import Any

from tui.transport.access import HttpAccess
from tui.transport.prometheus import Scrape, ScrapeError, parse
from tui.transport.whole import SCRAPE_LIMIT, json_body


class InsideError(Exception):
    """A read failed (one-line message: the endpoint and why)."""


class Fetcher:
    """One server's bounded GETs over one kept client (see the module docstring)."""

    def __init__(self, access: HttpAccess) -> None:
        self.access = access
        self._client: Any = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def body(self, url: str, end: float, limit: int = SCRAPE_LIMIT) -> bytes:
        """GET ``url``'s whole body by ``end`` (time.monotonic()); InsideError otherwise."""
        import httpx

        from tui.transport.http1 import BodyTooLarge
        from tui.transport.whole import deadline_client, get_whole

        left = end - time.monotonic()
        if left <= 0:
            raise InsideError(f"{url}: no time left for this read")
        if self._client is None:
            a = self.access
            self._client = deadline_client(headers=a.headers, verify=a.verify_tls)
        try:
            r = get_whole(self._client, url, limit=limit, deadline_s=left)
        except BodyTooLarge:
            self.close()  # (the connection holds the rest of that body)
            raise InsideError(f"{url}: more than {limit // 2**20} MiB") from None
        except httpx.HTTPError as e:
            self.close()
            why = " ".join(str(e).split())[:120]
            raise InsideError(f"{url}: {type(e).__name__}: {why}") from None
        if r.status_code != 200:
            raise InsideError(f"{url}: HTTP {r.status_code}")
        return r.content

    def scrape(self, url: str, end: float) -> Scrape:
        body = self.body(url, end)
        try:
            return parse(body.decode("utf-8", "replace"))
        except ScrapeError as e:
            raise InsideError(f"{url}: {e}") from None

    def json(self, url: str, end: float) -> Any:
        body = self.body(url, end)
        try:
            return json_body(body)
        except ValueError as e:
            raise InsideError(f"{url}: {e}") from None
