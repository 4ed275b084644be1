"""Read one endpoint directly: detect what it is once, then scrape it each refresh.

What is read, by kind (detected with :func:`tui.engines.servers.detect.detect_server`, or taken
from the engine's config when it says vllm, llama-server or ollama):

- vllm, llama-server: ``GET /metrics``; each row compares the scrape with the previous
  one of the same endpoint (the window is the time between them, see
  :mod:`tui.fleet.rows`), so the first refresh has gauges but no rates or quantiles.
- ollama: ``GET /api/ps`` (up, and the loaded models).
- openai (any other OpenAI-compatible server): ``GET /v1/models`` (up, and the model).

A connection that fails makes the row "down" with the transport's one-line reason and
forgets the previous scrape (a restarted server starts a new window); a server that
answers but not as expected is "up" with the reason in ``error``. Every request carries
the endpoint's own access (headers, API key, TLS setting: ``access_for``).
"""

from __future__ import annotations

import ssl
import threading
import time
from urllib.parse import urlsplit

import httpx

from tui.engines.base import EngineError, EngineSpec
from tui.engines.http.http_common import access_for, base_url, describe_transport_error
from tui.engines.kinds import find_kind
from tui.engines.servers.detect import detect_server
from tui.fleet.rows import EndpointRow
from tui.telemetry.servers.ollama_ps import LoadedModel, parse_ps
from tui.transport.access import HttpAccess
from tui.transport.http_io import HttpTimeouts, WholeResponse
from tui.transport.prometheus import (
    Scrape,
    ScrapeError,
    counter_delta,
    counter_rate,
    histogram_window,
    parse,
)
from tui.transport.whole import SCRAPE_LIMIT, deadline_client, get_whole, json_body

VLLM_KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
VLLM_ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _ratio_pct(part: float | None, whole: float | None) -> float | None:
    if part is None or whole is None or whole <= 0:
        return None
    return 100.0 * part / whole


def _label(scrape: Scrape, name: str, label: str) -> str | None:
    for labels in scrape.samples.get(name, {}):
        value = dict(labels).get(label)
        if value:
            return value
    return None


BY_SOURCE = "vllm:prompt_tokens_by_source_total"
CACHED = ("local_cache_hit", "external_kv_transfer")  # its sources that are a cache


def _loaded_text(m: LoadedModel) -> str:
    """One model Ollama holds: its memory, the share on the GPU, context, expiry."""
    ctx = f", ctx {m.context_length:,}" if m.context_length else ""
    expires = f", expires {m.expires_at}" if m.expires_at else ""
    return f"{m.name} {m.size / 2**30:.1f} GiB ({m.placement}){ctx}{expires}"


def fill_vllm(row: EndpointRow, prev: Scrape | None, cur: Scrape) -> None:
    """vLLM's columns from scrape ``cur`` (gauges) and ``cur`` − ``prev`` (the window)."""
    row.running = cur.total("vllm:num_requests_running")
    row.waiting = cur.total("vllm:num_requests_waiting")
    for name in VLLM_KV:
        values = list(cur.samples.get(name, {}).values())
        if values:
            row.kv_cache_pct = 100.0 * sum(values) / len(values)
            break
    row.model = _label(cur, "vllm:num_requests_running", "model_name") or row.model
    if prev is None:
        return
    row.window_s = cur.t - prev.t
    row.gen_tps = counter_rate(prev, cur, "vllm:generation_tokens_total")
    if cur.has(BY_SOURCE):
        cached = sum(counter_delta(prev, cur, BY_SOURCE, source=s) or 0.0 for s in CACHED)
        row.prefix_cache_hit_pct = _ratio_pct(cached, counter_delta(prev, cur, BY_SOURCE))
    else:
        row.prefix_cache_hit_pct = _ratio_pct(
            counter_delta(prev, cur, "vllm:prefix_cache_hits_total"),
            counter_delta(prev, cur, "vllm:prefix_cache_queries_total"),
        )
    preempted = counter_delta(prev, cur, "vllm:num_preemptions_total")
    if preempted is not None and row.window_s:
        row.preempt_per_min = 60.0 * preempted / row.window_s
    row.spec_accept_pct = _ratio_pct(
        counter_delta(prev, cur, "vllm:spec_decode_num_accepted_tokens_total"),
        counter_delta(prev, cur, "vllm:spec_decode_num_draft_tokens_total"),
    )
    if cur.has("vllm:time_to_first_token_seconds_bucket"):
        w = histogram_window(prev, cur, "vllm:time_to_first_token_seconds")
        row.ttft_p50_ms, row.ttft_p90_ms = _ms(w.quantile(0.5)), _ms(w.quantile(0.9))
    itl = next((n for n in VLLM_ITL if cur.has(n + "_bucket")), None)
    if itl is not None:
        w = histogram_window(prev, cur, itl)
        row.itl_p50_ms, row.itl_p90_ms = _ms(w.quantile(0.5)), _ms(w.quantile(0.9))
        row.itl_mean_ms = _ms(w.mean)


def fill_llamacpp(row: EndpointRow, prev: Scrape | None, cur: Scrape) -> None:
    """llama-server's columns (its gauges that reset on scrape are not used)."""
    row.running = cur.total("llamacpp:requests_processing")
    row.waiting = cur.total("llamacpp:requests_deferred")
    if prev is None:
        return
    row.window_s = cur.t - prev.t
    row.gen_tps = counter_rate(prev, cur, "llamacpp:tokens_predicted_total")
    cached = counter_delta(prev, cur, "llamacpp:prompt_tokens_cached_total")
    fresh = counter_delta(prev, cur, "llamacpp:prompt_tokens_total")
    if cached is not None and fresh is not None:
        row.prefix_cache_hit_pct = _ratio_pct(cached, cached + fresh)
    row.spec_accept_pct = _ratio_pct(
        counter_delta(prev, cur, "llamacpp:spec_decode_num_accepted_tokens_total"),
        counter_delta(prev, cur, "llamacpp:spec_decode_num_draft_tokens_total"),
    )
    tokens = counter_delta(prev, cur, "llamacpp:tokens_predicted_total")
    seconds = counter_delta(prev, cur, "llamacpp:tokens_predicted_seconds_total")
    if tokens and seconds is not None:
        row.itl_mean_ms = 1000.0 * seconds / tokens


class HttpClients:
    """One small keep-alive client per server, built on one TLS context per TLS setting.

    Not one shared client: httpx's connection pool looks at every pooled connection for
    every connection on each request, so with a connection to each of 200 servers in one
    pool a GET costs ~15 ms of CPU (measured: 200 GETs, 3.1 s against 0.11 s with a client
    per server). Safe to use from several threads."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._tls: dict[bool, ssl.SSLContext] = {}
        self._clients: dict[tuple[str, bool], httpx.Client] = {}
        self._lock = threading.Lock()

    def get(self, url: str, access: HttpAccess) -> WholeResponse:
        """GET ``url`` whole: within the timeout (an overall deadline, not only per read)
        and SCRAPE_LIMIT bytes; httpx's exception types for faults."""
        parts = urlsplit(url)
        key = (f"{parts.scheme}://{parts.netloc}", access.verify_tls)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                tls = self._tls.get(access.verify_tls)
                if tls is None:
                    tls = self._tls[access.verify_tls] = httpx.create_ssl_context(
                        verify=access.verify_tls
                    )
                client = self._clients[key] = deadline_client(
                    timeout=self.timeout_s,
                    verify=tls,
                    limits=httpx.Limits(max_connections=2, max_keepalive_connections=1),
                )
        return get_whole(
            client, url, limit=SCRAPE_LIMIT, deadline_s=self.timeout_s, headers=access.headers
        )

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


class DirectEndpoint:
    """One endpoint read directly; :meth:`poll` is called once per refresh (one thread at
    a time per endpoint)."""

    def __init__(self, spec: EngineSpec, clients: HttpClients) -> None:
        self.spec = spec
        self.clients = clients
        kind = find_kind(spec.kind)  # a configured kind its server's answers tell needs no probe
        self.kind: str | None = spec.kind if kind is not None and kind.recognised else None
        self._trusted = self.kind is not None
        self._detected = False
        self.models: list[str] = []
        self.previous: Scrape | None = None
        self.base: str | None = None
        self.setup_error: str | None = None
        self.access = HttpAccess()
        try:
            self.base = base_url(spec)
            self.access = access_for(spec)
        except EngineError as e:
            self.setup_error = str(e)

    @property
    def host(self) -> str | None:
        return urlsplit(self.base).hostname if self.base else None

    def _row(self) -> EndpointRow:
        return EndpointRow(
            name=self.spec.name,
            url=self.base or self.spec.url,
            kind=self.kind,
            model=self.spec.model or (self.models[0] if self.models else None),
            host=self.host,
        )

    def _down(self, row: EndpointRow, error: str) -> EndpointRow:
        row.up, row.error = False, error
        self.previous = None
        if not self._trusted:
            self._detected = False  # whatever comes back there is probed again
        return row

    def _transport_error(self, e: httpx.HTTPError) -> str:
        t = HttpTimeouts(self.clients.timeout_s, self.clients.timeout_s, self.clients.timeout_s)
        return describe_transport_error(e, self.base or "", t).message

    def poll(self) -> EndpointRow:
        """Read the endpoint now (blocking). Never raises: failures are in the row."""
        row = self._row()
        if self.setup_error is not None or self.base is None:
            return self._down(row, self.setup_error or "no URL")
        if not self._detected and not self._trusted:
            try:
                found = detect_server(self.base, self.clients.timeout_s, self.access)
            except EngineError as e:
                return self._down(row, str(e))
            self.kind, self.models, self._detected = found.kind, found.models, True
            row = self._row()
        try:
            if self._scraped():
                self._scrape(row)
            elif self.kind == "ollama":
                self._ollama(row)
            else:
                self._models(row)
        except httpx.HTTPError as e:
            return self._down(row, self._transport_error(e))
        return row

    def _scraped(self) -> bool:
        """Whether this endpoint's kind serves the Prometheus /metrics a row is read from."""
        kind = find_kind(self.kind) if self.kind else None
        return kind is not None and kind.metrics

    def _scrape(self, row: EndpointRow) -> None:
        assert self.base is not None
        if row.model is None and not self.models and self.kind == "llama-server":
            self._models(EndpointRow(row.name, row.url))  # once: its model for the row
            row.model = self.models[0] if self.models else None
        r = self.clients.get(self.base + "/metrics", self.access)
        row.up = True
        if r.status_code != 200:
            row.error = f"GET /metrics: HTTP {r.status_code} {' '.join(r.text.split())[:80]}"
            self.previous = None
            return
        try:
            cur = parse(r.text, t=time.monotonic())
        except ScrapeError as e:
            row.error = f"GET /metrics: {e}"
            self.previous = None
            return
        if self.kind == "vllm":
            fill_vllm(row, self.previous, cur)
        else:
            fill_llamacpp(row, self.previous, cur)
        self.previous = cur

    def _ollama(self, row: EndpointRow) -> None:
        assert self.base is not None
        r = self.clients.get(self.base + "/api/ps", self.access)
        row.up = True
        if r.status_code != 200:
            row.error = f"GET /api/ps: HTTP {r.status_code}"
            return
        try:
            loaded = parse_ps(json_body(r.content))
        except (ValueError, ScrapeError) as e:
            row.error = f"GET /api/ps: {e}"
            return
        row.model = ", ".join(m.name for m in loaded) or row.model
        row.loaded = "; ".join(_loaded_text(m) for m in loaded[:8]) or "no model loaded"

    def _models(self, row: EndpointRow) -> None:
        assert self.base is not None
        r = self.clients.get(self.base + "/v1/models", self.access)
        row.up = True
        if r.status_code != 200:
            row.error = f"GET /v1/models: HTTP {r.status_code}"
            return
        try:
            data = json_body(r.content)
        except ValueError:
            row.error = "GET /v1/models: not JSON"
            return
        items = data.get("data") if isinstance(data, dict) else None
        ids = [str(m["id"]) for m in items or [] if isinstance(m, dict) and "id" in m]
        if ids:
            self.models = ids
            row.model = row.model or ids[0]
