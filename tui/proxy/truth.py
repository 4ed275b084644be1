"""vLLM's own account of a proxied request, from its /metrics, without poking it mid-request.

vLLM's stream carries no timings; its /metrics histograms do (tui/engines/http/vllm.py reads
them around each request of its own). The proxy must not add a scrape in front of
anyone's request, so it scrapes only while no generation request passes through:

- once at start, and again whenever the proxy falls idle and holds no valid scrape
  (scraping until vLLM's count of finished requests holds still: it records a request
  just after the request's last chunk);
- after a request that ran *alone* (no other generation request overlapped it) ends,
  it scrapes until vLLM has recorded it (``e2e_request_latency_seconds_count`` grew, at
  most :data:`~tui.engines.http.vllm.SETTLE_S` s), and the request's engine report is the
  difference to the scrape before it (:func:`~tui.engines.http.vllm.truth_from_scrapes`: only
  when exactly one request finished in between — a client talking to vLLM past the proxy
  makes that false, and then nothing is reported, never a guess).

A scrape counts as "before" the next request only when no request started while it was
being taken. Requests that overlap get no engine report (their rows say why).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from tui.core.events import EngineTruth
from tui.engines.http.vllm import E2E, SETTLE_S, recorded, truth_from_scrapes
from tui.transport.http1 import Http1Pool
from tui.transport.http_io import TRANSPORT_ERRORS, HttpTimeouts
from tui.transport.prometheus import Scrape, ScrapeError, counter_delta, parse
from tui.transport.whole import SCRAPE_LIMIT

SCRAPE_TIMEOUT_S = 2.0
SCRAPE_ERRORS: tuple[type[BaseException], ...] = (*TRANSPORT_ERRORS, ScrapeError)


class ScrapedTruth:
    """vLLM engine reports for requests that ran alone (see the module docstring)."""

    def __init__(
        self, base_url: str, starts: Callable[[], int], in_flight: Callable[[], int]
    ) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.starts = starts  # how many generation requests have started so far
        self.in_flight = in_flight  # how many pass through now (a scrape waits for 0)
        t = SCRAPE_TIMEOUT_S
        self.timeouts = HttpTimeouts(t, t, t)
        self.pool: Http1Pool | None = None
        self.last: Scrape | None = None  # a scrape taken while idle, valid as a "before"
        self.last_starts = -1  # starts when ``last`` was taken
        self.scrapes = 0  # how many were made (the docs list what the proxy adds)
        self.began: deque[int] = deque(maxlen=1000)  # perf_counter_ns of each, the last
        self.busy = False

    async def scrape(self) -> Scrape | None:
        if self.pool is None:
            self.pool = Http1Pool({"User-Agent": "infertop-proxy"}, self.timeouts)
        self.scrapes += 1
        self.began.append(time.perf_counter_ns())
        try:
            resp = await asyncio.wait_for(self.pool.request("GET", self.url), SCRAPE_TIMEOUT_S)
            try:
                if resp.status_code != 200:
                    return None
                body = await asyncio.wait_for(
                    resp.read_all(self.timeouts, SCRAPE_LIMIT), SCRAPE_TIMEOUT_S
                )
            finally:
                await resp.aclose()
            return parse(body.decode("utf-8", "replace"))
        except SCRAPE_ERRORS:
            return None

    def before(self) -> Scrape | None:
        """The scrape to compare a request starting now against (called as it starts,
        before it is counted in ``starts``), or None."""
        return self.last if self.last_starts == self.starts() else None

    async def refresh(self) -> None:
        """Scrape while idle, until vLLM's count of finished requests holds still
        between two scrapes (it records a request just after its last chunk) or
        SETTLE_S passes; kept only if no request started meanwhile."""
        if self.busy:
            return
        self.busy = True
        try:
            starts = self.starts()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE_S
            prev: Scrape | None = None
            while True:
                if self.in_flight() or self.starts() != starts:
                    return
                s = await self.scrape()
                if s is None or self.starts() != starts:
                    return
                if prev is not None and counter_delta(prev, s, E2E + "_count") == 0:
                    break
                if loop.time() > deadline:
                    return
                prev = s
                await asyncio.sleep(0.02)
            self.last, self.last_starts = s, starts
        finally:
            self.busy = False

    async def after(self, before: Scrape) -> tuple[EngineTruth | None, str]:
        """(The report of the one request that ended since ``before``, why not), read
        once vLLM has recorded it; only if no request started meanwhile."""
        starts = self.starts()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_S
        while True:
            if self.starts() != starts:  # (checked before each scrape: none mid-request)
                return None, "another request began before vLLM's account was read"
            after = await self.scrape()
            if after is None:
                return None, "vLLM's /metrics could not be read"
            if self.starts() != starts:
                return None, "another request began before vLLM's account was read"
            done = recorded(before, after)
            if done or loop.time() > deadline:
                self.last, self.last_starts = after, starts
                if not done:
                    return None, f"vLLM had not recorded it after {SETTLE_S:g} s"
                truth = truth_from_scrapes(before, after)
                if truth is None:
                    n = counter_delta(before, after, E2E + "_count")
                    why = f"{n or 0:g} requests finished in vLLM meanwhile, not 1"
                    return None, why + " (a client past the proxy?)"
                return truth, ""
            await asyncio.sleep(0.02)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
