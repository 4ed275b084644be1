"""Read every endpoint a Prometheus server scrapes, in a fixed number of HTTP requests.

``GET /api/v1/targets`` lists what Prometheus scrapes (health, last error, the scrape
URL); then one instant ``/api/v1/query`` per column (below, 24 of them, sent a few at a
time) returns that column for every target at once. So a fleet of hundreds costs the same
25 requests as a fleet of one, and Prometheus does the arithmetic. (Joining the columns
into one query with ``or`` was measured too: one request, but slower — 180-240 ms
against 85-100 ms for 200 endpoints, since each ``or`` matches every series again.)

The columns mean what :mod:`tui.fleet.rows` says, over the PromQL range ``[window]``
instead of between two scrapes of our own: ``rate``/``increase`` of the same counters,
``histogram_quantile`` of the same bucket rates (the same interpolation). Series are
grouped by ``(job, instance)``; one target is one row.

Which targets are endpoints: a target with ``vllm:`` series is a vLLM row, one with
``llamacpp:`` series a llama-server row, one with ``infertop_proxy_`` series (an
``infertop proxy``'s ``/infertop/metrics``) a ``proxy→KIND`` row whose TTFT, ITL and
tok/s are the proxy's measurements of the traffic through it — judged over the last
``lookback`` too, so a
target that just went down keeps its kind. A down target with neither is listed (kind
unknown) only when its job holds endpoints. Other targets (DCGM, node_exporter,
Prometheus itself) are hardware or nothing, never rows.

Hosts: an endpoint's host is its ``instance`` label without the port. A GPU (DCGM
exporter series: ``DCGM_FI_DEV_*``) belongs to the host named by its ``Hostname``
label and to its own ``instance`` host; names match case-insensitively, and a dotted
name also matches its first label (``gpu7.example.com`` = ``gpu7``). node_exporter
series give the host's CPU and memory the same way.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable
from concurrent.futures import Executor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tui.fleet.promapi import PrometheusAPI
from tui.fleet.rows import EndpointRow, GpuRow

BY = "job, instance"
BY_SOURCE = "vllm:prompt_tokens_by_source_total"
CACHED = "local_cache_hit|external_kv_transfer"  # of its sources, those from a cache
PROXY = "infertop_proxy_"  # an `infertop proxy` (tui/proxy/exposition.py)

# column -> PromQL, with {w} the window and {lb} the lookback (seconds, as "60s").
ROW_EXPRS: dict[str, str] = {
    "kind_vllm": f"count by ({BY}, model_name) (last_over_time(vllm:num_requests_running[{{lb}}]))",
    "kind_llamacpp": f"count by ({BY}) (last_over_time(llamacpp:requests_processing[{{lb}}]))",
    "kind_proxy": f"count by ({BY}, kind) (last_over_time({PROXY}info[{{lb}}]))",
    "running": f"sum by ({BY}) (vllm:num_requests_running)"
    f" or sum by ({BY}) (llamacpp:requests_processing)"
    f" or sum by ({BY}) ({PROXY}requests_in_flight)",
    "waiting": f"sum by ({BY}) (vllm:num_requests_waiting)"
    f" or sum by ({BY}) (llamacpp:requests_deferred)",
    "kv": f"avg by ({BY}) (vllm:kv_cache_usage_perc) or avg by ({BY}) (vllm:gpu_cache_usage_perc)",
    "prefix": f'(sum by ({BY}) (increase({BY_SOURCE}{{{{source=~"{CACHED}"}}}}[{{w}}]))'
    f" / sum by ({BY}) (increase({BY_SOURCE}[{{w}}])))"
    f" or (sum by ({BY}) (increase(vllm:prefix_cache_hits_total[{{w}}]))"
    f" / sum by ({BY}) (increase(vllm:prefix_cache_queries_total[{{w}}])))"
    f" or (sum by ({BY}) (increase(llamacpp:prompt_tokens_cached_total[{{w}}]))"
    f" / (sum by ({BY}) (increase(llamacpp:prompt_tokens_cached_total[{{w}}]))"
    f" + sum by ({BY}) (increase(llamacpp:prompt_tokens_total[{{w}}]))))",
    "preempt": f"60 * sum by ({BY}) (rate(vllm:num_preemptions_total[{{w}}]))",
    "accept": f"(sum by ({BY}) (increase(vllm:spec_decode_num_accepted_tokens_total[{{w}}]))"
    f" / sum by ({BY}) (increase(vllm:spec_decode_num_draft_tokens_total[{{w}}])))"
    f" or (sum by ({BY}) (increase(llamacpp:spec_decode_num_accepted_tokens_total[{{w}}]))"
    f" / sum by ({BY}) (increase(llamacpp:spec_decode_num_draft_tokens_total[{{w}}])))",
    "gen_tps": f"sum by ({BY}) (rate(vllm:generation_tokens_total[{{w}}]))"
    f" or sum by ({BY}) (rate(llamacpp:tokens_predicted_total[{{w}}]))"
    f" or sum by ({BY}) (rate({PROXY}output_tokens_total[{{w}}]))",
    "itl_mean": f"(sum by ({BY}) (rate(vllm:inter_token_latency_seconds_sum[{{w}}]))"
    f" / sum by ({BY}) (rate(vllm:inter_token_latency_seconds_count[{{w}}])))"
    f" or (sum by ({BY}) (rate(llamacpp:tokens_predicted_seconds_total[{{w}}]))"
    f" / sum by ({BY}) (rate(llamacpp:tokens_predicted_total[{{w}}])))"
    f" or (sum by ({BY}) (rate({PROXY}itl_seconds_sum[{{w}}]))"
    f" / sum by ({BY}) (rate({PROXY}itl_seconds_count[{{w}}])))",
}
# an infertop proxy's busiest clients over the window (its per-client series: bounded,
# "other" the rest), by prompt + output tokens: one sample per (target, client)
TOP_CLIENTS = 3
ROW_EXPRS["top_clients"] = (
    f"topk by ({BY}) ({TOP_CLIENTS}, sum by ({BY}, client) "
    f"(increase({PROXY}client_prompt_tokens_total[{{w}}]))"
    f" + sum by ({BY}, client) (increase({PROXY}client_output_tokens_total[{{w}}])))"
)
for _col, _hist in (("ttft", "time_to_first_token"), ("itl", "inter_token_latency")):
    for _q in (50, 90):
        ROW_EXPRS[f"{_col}_p{_q}"] = (
            f"histogram_quantile({_q / 100}, sum by ({BY}, le)"
            f" (rate(vllm:{_hist}_seconds_bucket[{{w}}])))"
            f" or histogram_quantile({_q / 100}, sum by ({BY}, le)"
            f" (rate({PROXY}{_col}_seconds_bucket[{{w}}])))"
        )
# Per-GPU and per-host series, labels kept (the join is done here, by host).
GPU_SERIES: dict[str, str] = {
    "util_pct": "DCGM_FI_DEV_GPU_UTIL",
    "mem_used_mib": "DCGM_FI_DEV_FB_USED",
    "mem_free_mib": "DCGM_FI_DEV_FB_FREE",
    "mem_reserved_mib": "DCGM_FI_DEV_FB_RESERVED",
    "power_w": "DCGM_FI_DEV_POWER_USAGE",
    "temp_c": "DCGM_FI_DEV_GPU_TEMP",
    "sm_clock_mhz": "DCGM_FI_DEV_SM_CLOCK",
    "mem_clock_mhz": "DCGM_FI_DEV_MEM_CLOCK",
}
# Per-GPU expressions over the window (labels kept like the series above).
GPU_EXPRS: dict[str, str] = {
    "energy_j": "increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[{w}]) / 1000",
}
HOST_EXPRS: dict[str, str] = {
    "host_cpu_pct": '100 * (1 - avg by (job, instance) (rate(node_cpu_seconds_total{{mode="idle"}}'
    "[{w}])))",
    "host_mem_pct": "100 * (1 - sum by (job, instance) (node_memory_MemAvailable_bytes)"
    " / sum by (job, instance) (node_memory_MemTotal_bytes))",
}


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds))}s"


def fleet_queries(window_s: float, lookback_s: float) -> dict[str, str]:
    """Column -> the PromQL instant query that returns it for every target."""
    w, lb = _duration(window_s), _duration(lookback_s)
    out = {c: e.format(w=w, lb=lb) for c, e in ROW_EXPRS.items()}
    out.update({f"gpu_{c}": name for c, name in GPU_SERIES.items()})
    out.update({f"gpu_{c}": e.format(w=w) for c, e in GPU_EXPRS.items()})
    out.update({c: e.format(w=w) for c, e in HOST_EXPRS.items()})
    return out


def instance_host(instance: str) -> str:
    """``host:port`` (or ``[v6]:port``, or a bare host) → the host, lower case."""
    try:
        host = urlsplit("//" + instance).hostname
    except ValueError:
        host = None
    return (host or instance).lower()


def host_names(host: str) -> list[str]:
    """The names a host may be matched by: itself, and a dotted name's first label."""
    host = host.lower()
    try:
        ipaddress.ip_address(host)
        return [host]
    except ValueError:
        pass
    short = host.split(".", 1)[0]
    return [host] if short == host else [host, short]


def _value(sample: dict[str, Any]) -> float | None:
    try:
        v = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class HostStats:
    cpu_pct: float | None = None
    mem_pct: float | None = None


@dataclass
class PromRead:
    """One refresh's worth of Prometheus data: endpoint rows keyed by scrape address
    (``host:port`` of the scrape URL), GPUs and host stats indexed by host name."""

    rows: dict[str, EndpointRow] = field(default_factory=dict)
    gpus: dict[str, list[GpuRow]] = field(default_factory=dict)
    hosts: dict[str, HostStats] = field(default_factory=dict)
    error: str | None = None

    def gpus_for(self, host: str | None) -> list[GpuRow] | None:
        if not host:
            return None
        for name in host_names(host):
            if name in self.gpus:
                return self.gpus[name]
        return None

    def host_stats(self, host: str | None) -> HostStats | None:
        if not host:
            return None
        for name in host_names(host):
            if name in self.hosts:
                return self.hosts[name]
        return None


def build_rows(
    targets: list[dict[str, Any]], results: dict[str, list[dict[str, Any]]], window_s: float
) -> PromRead:
    """Rows, GPUs and hosts from ``/api/v1/targets`` and each column's query result."""
    cols: dict[tuple[str, str], dict[str, Any]] = {}
    gpu_cols: dict[tuple[str, ...], dict[str, Any]] = {}
    out = PromRead()
    for col, result in results.items():
        for sample in result:
            labels = sample.get("metric") or {}
            key = (labels.get("job", ""), labels.get("instance", ""))
            value = _value(sample)
            if col.startswith("gpu_"):
                gkey = (*key, labels.get("gpu", ""), labels.get("UUID", ""))
                g = gpu_cols.setdefault(gkey, {"labels": labels})
                g[col[4:]] = value
            elif col == "top_clients":
                if value is not None:
                    top = cols.setdefault(key, {}).setdefault("top_clients", [])
                    top.append((str(labels.get("client", "?"))[:64], value))
            else:
                cols.setdefault(key, {})[col] = value
                if col == "kind_vllm" and labels.get("model_name"):
                    cols[key]["model"] = labels["model_name"]
                if col == "kind_proxy":
                    cols[key]["upstream_kind"] = labels.get("kind") or "?"
    _gpus(out, gpu_cols.values())
    _hosts(out, cols)
    endpoint_jobs = {job for (job, _), c in cols.items() if _kind(c) is not None}
    for t in targets:
        labels = t.get("labels") or {}
        key = (labels.get("job", ""), labels.get("instance", ""))
        c = cols.get(key, {})
        kind = _kind(c)
        health = t.get("health")
        if kind is None and (health == "up" or key[0] not in endpoint_jobs):
            continue  # hardware, Prometheus itself, or something that is no endpoint
        row = _row(t, key, kind, c, window_s)
        out.rows[(urlsplit(row.url).netloc if row.url else "") or key[1]] = row
    return out


def _kind(c: dict[str, Any]) -> str | None:
    """vllm, llama-server, proxy→KIND (an infertop proxy in front of KIND), or None."""
    if "kind_vllm" in c:
        return "vllm"
    if "kind_llamacpp" in c:
        return "llama-server"
    if "kind_proxy" in c:
        return f"proxy→{c.get('upstream_kind') or '?'}"
    return None


def _row(
    target: dict[str, Any], key: tuple[str, str], kind: str | None, c: dict[str, Any], w: float
) -> EndpointRow:
    scrape_url = str(target.get("scrapeUrl") or "")
    try:
        parts = urlsplit(scrape_url)
        url = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None
    except ValueError:  # "http://[::1": not a URL Prometheus would scrape
        url = None
    health = target.get("health")
    row = EndpointRow(
        name=key[1],
        url=url,
        kind=kind,
        model=c.get("model"),
        up=health == "up",
        host=instance_host(key[1]),
        source="prometheus",
        window_s=w,
    )
    if health != "up":
        last = str(target.get("lastError") or "").strip()
        row.error = "not scraped yet" if health == "unknown" else f"Prometheus: target down: {last}"
        return row
    row.running, row.waiting = c.get("running"), c.get("waiting")
    if c.get("top_clients"):
        row.top_clients = sorted(c["top_clients"], key=lambda x: -x[1])[:TOP_CLIENTS]
    kv, prefix = c.get("kv"), c.get("prefix")
    row.kv_cache_pct = None if kv is None else 100.0 * kv
    row.prefix_cache_hit_pct = None if prefix is None else 100.0 * prefix
    row.gen_tps = c.get("gen_tps")
    row.preempt_per_min = c.get("preempt")
    accept = c.get("accept")
    row.spec_accept_pct = None if accept is None else 100.0 * accept
    for col in ("ttft_p50", "ttft_p90", "itl_p50", "itl_p90", "itl_mean"):
        v = c.get(col)
        setattr(row, col + "_ms", None if v is None else 1000.0 * v)
    return row


def _gpus(out: PromRead, gpus: Iterable[dict[str, Any]]) -> None:
    for g in gpus:
        labels = g.pop("labels")
        inst = instance_host(labels.get("instance", ""))
        named = str(labels.get("Hostname") or "").lower()
        row = GpuRow(
            host=named or inst,
            gpu=labels.get("gpu"),
            uuid=labels.get("UUID"),
            model=labels.get("modelName"),
            **{k: g.get(k) for k in (*GPU_SERIES, *GPU_EXPRS)},
        )
        names = dict.fromkeys(host_names(named) if named else [])
        names.update(dict.fromkeys(host_names(inst)))
        for name in names:
            out.gpus.setdefault(name, []).append(row)
    for rows in out.gpus.values():
        rows.sort(key=lambda r: (r.host, _gpu_order(r.gpu)))


def _gpu_order(gpu: str | None) -> tuple[int, str]:
    return (int(gpu), "") if gpu and gpu.isascii() and gpu.isdigit() else (1 << 30, gpu or "")


def _hosts(out: PromRead, cols: dict[tuple[str, str], dict[str, Any]]) -> None:
    for (_, instance), c in cols.items():
        if "host_cpu_pct" not in c and "host_mem_pct" not in c:
            continue
        stats = HostStats(c.get("host_cpu_pct"), c.get("host_mem_pct"))
        for name in host_names(instance_host(instance)):
            out.hosts[name] = stats


def read_prometheus(
    api: PrometheusAPI, window_s: float, lookback_s: float, pool: Executor | None = None
) -> PromRead:
    """Targets, then every column's query (on ``pool``, a few at a time); a failure is
    ``error`` (and no rows)."""
    from tui.fleet.promapi import PrometheusError

    queries = fleet_queries(window_s, lookback_s)
    try:
        targets = api.targets()
        if pool is None:
            answers = [api.query(q) for q in queries.values()]
        else:
            # each query ends by its own deadline; this bounds the lot all the same
            wait = api.timeout_s * (len(queries) + 1)
            answers = list(pool.map(api.query, queries.values(), timeout=wait))
    except PrometheusError as e:
        return PromRead(error=str(e))
    except FutureTimeout:
        return PromRead(error=f"Prometheus {api.base}: the queries took over {wait:.0f} s")
    try:
        return build_rows(targets, dict(zip(queries, answers)), window_s)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        # the API's answers are checked for shape (promapi); this is the last net
        return PromRead(error=f"Prometheus {api.base}: an answer of unexpected shape ({e})")
