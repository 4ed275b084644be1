"""The fleet as a whole: which endpoints, and one refresh of all their rows.

Endpoints are engine specs (so each keeps its own name, API key, headers and TLS
setting). :class:`Fleet` reads them each refresh: through Prometheus when one is given
(every target it scrapes becomes a row; a configured endpoint that Prometheus scrapes
takes its row from there, under the configured name), directly otherwise, in a small
thread pool so that a slow or dead endpoint costs one timeout, not one per endpoint.
GPUs and host stats from Prometheus are joined to every row by host, direct rows too;
an endpoint with a named hardware source takes them from there (:mod:`tui.fleet.hardware`).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from urllib.parse import urlsplit

from tui.engines.base import EngineError, EngineSpec
from tui.engines.http.http_common import base_url
from tui.engines.kinds import find_kind
from tui.fleet.direct import DirectEndpoint, HttpClients
from tui.fleet.hardware import FleetHardware
from tui.fleet.promapi import PrometheusAPI, PrometheusError
from tui.fleet.promql import PromRead, read_prometheus
from tui.fleet.rows import EndpointRow, FleetSnapshot
from tui.transport.access import redact_url

DEFAULT_INTERVAL_S = 2.0
DEFAULT_WINDOW_S = 60.0
DEFAULT_TIMEOUT_S = 2.0
LOOKBACK_S = 300.0  # a target down for less than this keeps its kind (Prometheus rows)
ONCE_GAP_S = 1.0  # --once: the time between the two scrapes of each endpoint
HARDWARE_WAIT_S = 15.0  # --once: longest wait for a remote hardware source's first reading
PROM_PARALLEL = 4  # Prometheus queries in flight at once (see Fleet.__init__)
POLL_REQUESTS = 8  # the most requests one poll of an endpoint makes (detect: 6, scrape: 2)


def endpoint_from_url(url: str, engines: dict[str, EngineSpec], verify_tls: bool) -> EngineSpec:
    """An endpoint for ``url``: the configured engine at that URL when there is one (its
    name and access), else a spec named after ``host:port`` with the kind to detect."""
    probe = EngineSpec(name=url, kind="?", url=url, verify_tls=verify_tls)
    try:
        base = base_url(probe)
    except EngineError:
        return probe  # polled, it says why the URL is unusable
    for spec in engines.values():
        if spec.url and _same(spec, base):
            return spec
    return EngineSpec(
        name=urlsplit(base).netloc,
        kind="?",
        url=base,
        headers=dict(probe.headers),  # credentials from the URL, as a header
        verify_tls=verify_tls,
    )


def _same(spec: EngineSpec, base: str) -> bool:
    try:
        return base_url(spec) == base
    except EngineError:
        return False


def fleet_endpoints(
    urls: list[str], engines: dict[str, EngineSpec], verify_tls: bool = True
) -> list[EngineSpec]:
    """The endpoints to show: ``urls`` (each matched to a configured engine where one has
    that URL) when given, else every configured engine that has a URL."""
    if urls:
        chosen = [endpoint_from_url(u, engines, verify_tls) for u in urls]
    else:
        chosen = [s for s in engines.values() if s.url]
    seen: set[str] = set()
    out = []
    for spec in chosen:
        key = spec.url or spec.name
        if key not in seen:
            seen.add(key)
            out.append(spec)
    return out


class Fleet:
    """Reads every endpoint once per :meth:`refresh` (blocking; call it from a worker
    thread). Never raises for an endpoint's or Prometheus's failure: rows and the
    snapshot say what failed."""

    def __init__(
        self,
        endpoints: list[EngineSpec],
        prometheus: str | None = None,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        lookback_s: float = LOOKBACK_S,
        verify_tls: bool = True,
        max_workers: int = 16,
        hardware: FleetHardware | None = None,
    ) -> None:
        self.clients = HttpClients(timeout_s)
        self.hardware = hardware
        self.direct = [DirectEndpoint(spec, self.clients) for spec in endpoints]
        self.prometheus_url = prometheus
        self.window_s = window_s
        self.lookback_s = lookback_s
        self.verify_tls = verify_tls
        self.api: PrometheusAPI | None = None
        self._api_error: str | None = None
        if prometheus:
            try:
                self.api = PrometheusAPI(prometheus, max(timeout_s, 5.0), verify_tls)
            except PrometheusError as e:
                self._api_error = str(e)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="fleet")
        self._polls: dict[int, Future[EndpointRow]] = {}  # each endpoint's latest poll
        # Prometheus's queries, PROM_PARALLEL at a time (measured: 4 halves the wall time
        # of one at a time on 2 cores; more gains nothing)
        self._prom_pool = ThreadPoolExecutor(PROM_PARALLEL, thread_name_prefix="fleet-prom")

    @property
    def prometheus_shown(self) -> str | None:
        """The Prometheus URL as it may be shown (no credentials)."""
        if self.api is not None:
            return self.api.base
        return redact_url(self.prometheus_url) if self.prometheus_url else None

    def endpoint_names(self) -> list[str]:
        return [d.spec.name for d in self.direct]

    def refresh(self) -> FleetSnapshot:
        """Every row, read now."""
        t0 = time.perf_counter()
        t0_mono = time.monotonic()
        prom: PromRead | None = None
        requests_before = self.api.requests if self.api is not None else 0
        if self.api is not None:  # first: it says which endpoints need no scrape of ours
            prom = read_prometheus(self.api, self.window_s, self.lookback_s, self._prom_pool)
        elif self._api_error:
            prom = PromRead(error=self._api_error)
        covered = prom.rows if prom is not None else {}
        rows: list[EndpointRow] = []
        futures: list[tuple[int, Future[EndpointRow]]] = []
        for i, d in enumerate(self.direct):
            netloc = urlsplit(d.base or "").netloc
            if netloc and netloc in covered:
                row = covered.pop(netloc)
                row.name = d.spec.name  # the configured name for a configured endpoint
                rows.append(row)
                continue
            rows.append(EndpointRow(d.spec.name, d.spec.url))
            running = self._polls.get(i)
            if running is not None and not running.done():  # (one poll per endpoint)
                rows[i] = _late(rows[i], "still waiting for its previous read")
                continue
            futures.append((i, self._pool.submit(d.poll)))
            self._polls[i] = futures[-1][1]
        # every request of a poll ends by its deadline: a poll can take at most
        # POLL_REQUESTS of them (detection, then the scrape); a future that is later than
        # that is shown as down and left to finish on its own
        wait_until = time.monotonic() + self.clients.timeout_s * POLL_REQUESTS + 1.0
        for i, fut in futures:
            try:
                rows[i] = fut.result(timeout=max(0.0, wait_until - time.monotonic()))
            except FutureTimeout:
                rows[i] = _late(rows[i], f"no answer within {wait_until - t0_mono:.0f} s")
        rows.extend(sorted(covered.values(), key=lambda r: r.name))
        if prom is not None:
            _join_hosts(rows, prom)
        if self.hardware is not None:
            for i, d in enumerate(self.direct):
                name = self.hardware.source_name(d.spec.telemetry)
                if name:
                    self.hardware.fill(rows[i], name)
        return FleetSnapshot(
            rows=rows,
            took_s=time.perf_counter() - t0,
            prometheus=self.prometheus_shown,
            prometheus_error=prom.error if prom is not None else None,
            queries=(self.api.requests - requests_before) if self.api is not None else 0,
            scrapes=len(futures),
        )

    def once(self, gap_s: float = ONCE_GAP_S) -> FleetSnapshot:
        """One snapshot with rates: endpoints read directly are scraped twice, ``gap_s``
        apart (Prometheus rows need one read: Prometheus holds the window)."""
        t0 = time.monotonic()
        if self.direct and gap_s > 0:
            self.refresh()
            time.sleep(gap_s)
        if self.hardware is not None:
            names = [self.hardware.source_name(d.spec.telemetry) for d in self.direct]
            left = HARDWARE_WAIT_S - (time.monotonic() - t0)
            self.hardware.wait_ready([n for n in names if n], left)
        return self.refresh()

    def engine_spec_for(self, row: EndpointRow) -> EngineSpec:
        """An engine spec that talks to ``row``'s endpoint (see :func:`spec_for_row`)."""
        return spec_for_row(row, self.direct, self.verify_tls)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._prom_pool.shutdown(wait=False, cancel_futures=True)
        self.clients.close()
        if self.api is not None:
            self.api.close()
        if self.hardware is not None:
            self.hardware.close()


def spec_for_row(
    row: EndpointRow, direct: list[DirectEndpoint] | None = None, verify_tls: bool = True
) -> EngineSpec:
    """The engine to chat with ``row``'s endpoint: its configured engine, as configured,
    when it came from one; for a URL given on its own, a spec with its access and the
    detected kind; else (a Prometheus row) a new spec named after the row, of the row's
    kind ("openai" when unknown)."""
    kind = row.kind if row.kind and find_kind(row.kind) else "openai"
    for d in direct or []:
        if d.base is not None and d.base == row.url:
            if find_kind(d.spec.kind) is not None:
                return d.spec
            model = row.model if row.model and "," not in row.model else None
            return replace(d.spec, kind=kind, url=d.base, model=d.spec.model or model)
    return EngineSpec(name=row.name, kind=kind, url=row.url, model=row.model, verify_tls=verify_tls)


def _late(row: EndpointRow, why: str) -> EndpointRow:
    """``row`` as down because its poll has not answered in time."""
    row.up, row.error = False, why
    return row


def _join_hosts(rows: list[EndpointRow], prom: PromRead) -> None:
    """GPUs and host stats from Prometheus onto each row, by host."""
    for row in rows:
        if row.gpus is None:
            row.gpus = prom.gpus_for(row.host)
        stats = prom.host_stats(row.host)
        if stats is not None:
            row.host_cpu_pct, row.host_mem_pct = stats.cpu_pct, stats.mem_pct
