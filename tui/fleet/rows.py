"""What one fleet row says about one endpoint, and exactly what each number means.

A row is filled from the endpoint's own series: scraped from its ``/metrics`` twice
(:mod:`tui.fleet.direct`; the window is the time between the two scrapes) or read back
from a Prometheus server that scrapes it (:mod:`tui.fleet.promql`; the window is the
PromQL range ``[window_s]``). A number the endpoint does not report is ``None`` (null in
JSON, "–" on screen): never invented, never 0 in its place.

Columns (Δ = increase of a counter over the window, Δt = the window's length):

- running — vLLM ``vllm:num_requests_running``; llama-server ``llamacpp:requests_processing``.
- waiting — vLLM ``vllm:num_requests_waiting``; llama-server ``llamacpp:requests_deferred``.
- kv_cache_pct — vLLM 100 × ``vllm:kv_cache_usage_perc``; llama-server has no such series.
- prefix_cache_hit_pct — vLLM 100 × Δ``vllm:prompt_tokens_by_source_total`` of the
  sources local_cache_hit and external_kv_transfer ÷ Δ of all its sources (prompt tokens
  read from a cache ÷ prompt tokens, each counted once when its request is scheduled);
  builds without that counter: Δ``vllm:prefix_cache_hits_total`` /
  Δ``vllm:prefix_cache_queries_total`` (those count lookups, so a request that waits is
  looked up again each step); llama-server 100 × Δ``prompt_tokens_cached_total`` /
  (Δ``prompt_tokens_cached_total`` + Δ``prompt_tokens_total``) (its prompt_tokens_total
  excludes cached tokens). None when no prompt was looked up in the window.
- preempt_per_min — vLLM 60 × Δ``vllm:num_preemptions_total`` / Δt (requests preempted
  for want of KV cache, per minute).
- spec_accept_pct — speculative decoding: 100 × Δ``…spec_decode_num_accepted_tokens_total``
  / Δ``…spec_decode_num_draft_tokens_total`` (vLLM and llama-server; None when nothing
  was drafted in the window).
- gen_tps — generated tokens per second: vLLM Δ``vllm:generation_tokens_total`` / Δt;
  llama-server Δ``llamacpp:tokens_predicted_total`` / Δt (llama-server adds a request's
  tokens when it ends, so short windows are lumpy).
- ttft_p50_ms, ttft_p90_ms — vLLM: quantiles of the window's
  ``vllm:time_to_first_token_seconds`` observations (bucket deltas), server-side TTFT;
  llama-server has no such histogram.
- itl_p50_ms, itl_p90_ms — vLLM: the same for ``vllm:inter_token_latency_seconds``.
- itl_mean_ms — vLLM Δ``inter_token_latency_seconds_sum`` / Δ``_count``; llama-server
  Δ``tokens_predicted_seconds_total`` / Δ``tokens_predicted_total`` (its own decode time
  per generated token).

Gauges are read as they are at the second scrape (summed over vLLM's engines; KV cache
averaged over them). Quantiles interpolate inside the bucket as PromQL's
``histogram_quantile`` does (:mod:`tui.transport.prometheus`); a window in which no
request finished has no quantile. Ollama reports none of these (it has ``/api/ps``
only): its row has up/down and the loaded models. A generic OpenAI-compatible server
has up/down and its model (``/v1/models``).

GPU columns come from DCGM exporter series in Prometheus for the endpoint's host
(:mod:`tui.fleet.promql` says how hosts are matched): utilisation % (mean over the
host's GPUs), framebuffer memory used / total MiB (summed; total = used + free + reserved), power W
(summed). ``gpus`` is None when no hardware source is known for the host. An endpoint whose
engine names a ``telemetry`` source (or, for configured and ``--url`` endpoints, the
fleet's ``--telemetry``) takes its GPUs, CPU and RAM from that source instead
(:mod:`tui.fleet.hardware`): the same fields, from NVML on that host. node_exporter
series for the host give host_cpu_pct = 100 × (1 − rate of
``node_cpu_seconds_total{mode="idle"}`` averaged over CPUs) and host_mem_pct = 100 × (1 −
``node_memory_MemAvailable_bytes`` / ``node_memory_MemTotal_bytes``).

Energy (Prometheus rows with DCGM series): each GPU's ``energy_j`` = Δ
``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ) / 1000 over the window — its energy
counter, not integrated power — and the row's j_per_token = Σ of its host's GPUs'
``energy_j`` ÷ the endpoint's generated tokens in the window (gen_tps × Δt; the window of
tui/core/energy.py is here the PromQL range). It is the *host's* GPU energy: idle power
is in it, and endpoints sharing a host are each charged all of it. None when a GPU of
the host has no energy counter or no token was generated. Rows read by scraping (no
Prometheus) have no energy column: the hardware sources give readings, not windows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class GpuRow:
    """One GPU as DCGM reports it (labels ``gpu``, ``UUID``, ``modelName``, ``Hostname``)."""

    host: str
    gpu: str | None = None
    uuid: str | None = None
    model: str | None = None
    util_pct: float | None = None  # DCGM_FI_DEV_GPU_UTIL
    mem_used_mib: float | None = None  # DCGM_FI_DEV_FB_USED
    mem_free_mib: float | None = None  # DCGM_FI_DEV_FB_FREE
    mem_reserved_mib: float | None = None  # DCGM_FI_DEV_FB_RESERVED (driver's; newer DCGM)
    power_w: float | None = None  # DCGM_FI_DEV_POWER_USAGE
    temp_c: float | None = None  # DCGM_FI_DEV_GPU_TEMP
    sm_clock_mhz: float | None = None  # DCGM_FI_DEV_SM_CLOCK
    mem_clock_mhz: float | None = None  # DCGM_FI_DEV_MEM_CLOCK
    energy_j: float | None = None  # Δ DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION / 1000, the window

    @property
    def mem_total_mib(self) -> float | None:
        """used + free + reserved (reserved where exported): NVML's total."""
        if self.mem_used_mib is None or self.mem_free_mib is None:
            return None
        return self.mem_used_mib + self.mem_free_mib + (self.mem_reserved_mib or 0.0)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["mem_total_mib"] = self.mem_total_mib
        return out


@dataclass
class EndpointRow:
    """One endpoint's numbers over one window (see the module docstring)."""

    name: str
    url: str | None
    kind: str | None = None  # vllm | llama-server | ollama | openai | None (unknown)
    model: str | None = None
    up: bool = False
    error: str | None = None  # the last error, when down (or a partial failure when up)
    running: float | None = None
    waiting: float | None = None
    kv_cache_pct: float | None = None
    prefix_cache_hit_pct: float | None = None
    preempt_per_min: float | None = None
    spec_accept_pct: float | None = None
    gen_tps: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_mean_ms: float | None = None
    host_cpu_pct: float | None = None
    host_mem_pct: float | None = None
    gpus: list[GpuRow] | None = None
    host: str | None = None  # the host GPUs are matched on
    hardware: str | None = None  # a named hardware source's label (tui/fleet/hardware.py)
    hardware_error: str | None = None  # that source's trouble ("remote telemetry lost: ...")
    loaded: str | None = None  # Ollama: the models it holds (memory, GPU share, ctx, expiry)
    source: str = "scrape"  # "scrape" (read directly) or "prometheus"
    window_s: float | None = None  # what the rates and quantiles cover
    # an infertop proxy's busiest clients over the window: (client, prompt + output tokens)
    top_clients: list[tuple[str, float]] | None = None

    @property
    def key(self) -> str:
        """Stable identity of the row across refreshes."""
        return self.url or self.name

    @property
    def gpu_util_pct(self) -> float | None:
        vals = [g.util_pct for g in self.gpus or [] if g.util_pct is not None]
        return sum(vals) / len(vals) if vals else None

    @property
    def gpu_mem_used_mib(self) -> float | None:
        vals = [g.mem_used_mib for g in self.gpus or [] if g.mem_used_mib is not None]
        return sum(vals) if vals else None

    @property
    def gpu_mem_total_mib(self) -> float | None:
        vals = [g.mem_total_mib for g in self.gpus or []]
        return sum(v for v in vals if v is not None) if vals and None not in vals else None

    @property
    def gpu_power_w(self) -> float | None:
        vals = [g.power_w for g in self.gpus or [] if g.power_w is not None]
        return sum(vals) if vals else None

    @property
    def gpu_energy_j(self) -> float | None:
        """The host's GPUs' energy over the window (None when one has no counter)."""
        vals = [g.energy_j for g in self.gpus or []]
        return sum(v for v in vals if v is not None) if vals and None not in vals else None

    @property
    def j_per_token(self) -> float | None:
        """Σ GPU energy over the window ÷ tokens generated in it (see the docstring)."""
        energy, tps, w = self.gpu_energy_j, self.gen_tps, self.window_s
        if energy is None or not tps or not w or tps <= 0:
            return None
        return energy / (tps * w)

    def to_json(self) -> dict[str, Any]:
        """The row as ``infertop fleet --json`` prints it (null where not reported)."""
        out: dict[str, Any] = {
            "name": self.name,
            "url": self.url,
            "kind": self.kind,
            "model": self.model,
            "up": self.up,
            "error": self.error,
        }
        for key in NUMBER_FIELDS:
            value = getattr(self, key)
            out[key] = None if value is None else round(float(value), 3)
        out["gpus"] = None if self.gpus is None else [g.to_json() for g in self.gpus]
        out["loaded"] = self.loaded
        out["host"] = self.host
        out["hardware"] = self.hardware
        out["hardware_error"] = self.hardware_error
        out["source"] = self.source
        out["top_clients"] = (
            None
            if self.top_clients is None
            else [{"client": c, "tokens": round(t, 1)} for c, t in self.top_clients]
        )
        out["window_s"] = None if self.window_s is None else round(self.window_s, 3)
        return out


NUMBER_FIELDS = (
    "running",
    "waiting",
    "kv_cache_pct",
    "prefix_cache_hit_pct",
    "preempt_per_min",
    "spec_accept_pct",
    "gen_tps",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "itl_p50_ms",
    "itl_p90_ms",
    "itl_mean_ms",
    "host_cpu_pct",
    "host_mem_pct",
    "j_per_token",
)


@dataclass
class FleetSnapshot:
    """Every row of one refresh. ``took_s``: wall time of the refresh; ``queries``: HTTP
    requests made to Prometheus; ``scrapes``: endpoints read directly."""

    rows: list[EndpointRow] = field(default_factory=list)
    took_s: float = 0.0
    prometheus: str | None = None
    prometheus_error: str | None = None
    queries: int = 0
    scrapes: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"endpoints": [r.to_json() for r in self.rows]}
        if self.prometheus is not None:
            out["prometheus"] = {"url": self.prometheus, "error": self.prometheus_error}
        return out
