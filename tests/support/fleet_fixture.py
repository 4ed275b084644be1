"""Fixture endpoints for the fleet: many small /metrics servers with known numbers.

One process (one asyncio loop on a thread) serves any number of ports. Each port is one
of:

- ``vllm``: vLLM-like ``/metrics`` (series named and labelled as vLLM 0.32 names them:
  ``vllm:num_requests_running{model_name,engine}``, ``vllm:generation_tokens_total``,
  ``vllm:prefix_cache_{queries,hits}_total``, ``vllm:kv_cache_usage_perc``, the
  ``time_to_first_token_seconds`` / ``inter_token_latency_seconds`` histograms), plus
  ``/v1/models`` (``owned_by: vllm``, so detection says vllm) and ``/version``; with
  ``engines=2`` a data-parallel server: every series once per ``engine`` label, split so
  that sums (and the KV mean) give the same expected numbers;
- ``llama-server``: llama-server-like ``/metrics`` (``llamacpp:*``, no labels),
  ``/props`` with ``total_slots``, ``/v1/models``;
- ``dcgm``: a DCGM exporter's ``/metrics``, written from DCGM's documented field names
  (``DCGM_FI_DEV_GPU_UTIL`` %, ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` MiB,
  ``DCGM_FI_DEV_POWER_USAGE`` W, ``DCGM_FI_DEV_GPU_TEMP`` °C, ``DCGM_FI_DEV_SM_CLOCK`` /
  ``DCGM_FI_DEV_MEM_CLOCK`` MHz, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` mJ (a counter);
  labels ``gpu``, ``UUID``, ``device``, ``modelName``,
  ``Hostname``). The real exporter cannot run without an NVIDIA GPU; this stands in
  for it.

The vllm and llama-server ports also answer chat completions as the pace server does
(a few paced tokens), so the chat screen can stream from them.

Numbers are a function of the port's index ``i`` and of how many times its /metrics was
read (``n``): counters grow by a fixed step per scrape, histograms by a fixed set of
observations per scrape, gauges are constant. So any window's quantiles and ratios are
known exactly (see :func:`expected_vllm`), and rates are step / Δt.

Run ``python -m tests.support.fleet_fixture --vllm 200 --dcgm-hosts 25`` from the repository
root to serve (prints one JSON line with the ports, then serves until killed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.pace_server import HttpRequest, PaceConfig, PaceServer

TTFT_BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5]
ITL_BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0]
GPU_MODEL = "NVIDIA H100 80GB HBM3"
FB_TOTAL_MIB = 81559


@dataclass(frozen=True)
class Profile:
    """What one port serves. ``i`` varies the numbers; ``host`` is the DCGM Hostname."""

    kind: str  # vllm | llama-server | dcgm
    i: int = 0
    model: str = "fixture-model"
    host: str = "fixture-host"
    gpus: int = 2
    engines: int = 1  # vllm: 2 = a data-parallel server, series per ``engine`` label


def _histogram(name: str, bounds: list[float], counts: list[float], total: float, lab: str) -> str:
    """Prometheus text for one histogram: ``counts`` per bucket (not cumulative)."""
    return _histograms(name, bounds, [(lab, counts, total)])


def _histograms(
    name: str, bounds: list[float], series: list[tuple[str, list[float], float]]
) -> str:
    """One histogram family with a series per label set: (labels, counts per bucket (not
    cumulative), sum)."""
    out = [f"# HELP {name} fixture histogram", f"# TYPE {name} histogram"]
    for lab, counts, total in series:
        cum = 0.0
        for le, c in zip([*map(str, bounds), "+Inf"], [*counts, 0.0]):
            cum += c
            out.append(f'{name}_bucket{{{lab},le="{le}"}} {cum}')
        out.append(f"{name}_count{{{lab}}} {cum}")
        out.append(f"{name}_sum{{{lab}}} {total}")
    return "\n".join(out)


def vllm_steps(i: int) -> dict[str, float]:
    """Per-scrape increments of the vLLM fixture ``i``."""
    return {
        "gen": 50.0 + 10 * (i % 10),
        "prompt": 200.0,
        "queries": 100.0,
        "hits": 20.0 + i % 60,
    }


def _ttft_bucket(i: int) -> int:
    return 3 + i % 5  # 4 observations in this bucket, 6 in the next, per scrape


def expected_vllm(i: int) -> dict[str, float]:
    """What a window of any whole number of scrapes of fixture ``i`` gives: the p50 and
    p90 by PromQL's interpolation, the prefix hit %, the KV %, running, waiting."""
    k = _ttft_bucket(i)
    lo, hi = TTFT_BOUNDS[k], TTFT_BOUNDS[k + 1]  # rank 5 of 10: 1st of 6 in bucket k+1
    p50 = lo + (hi - lo) * (5 - 4) / 6
    p90 = lo + (hi - lo) * (9 - 4) / 6
    s = vllm_steps(i)
    return {
        "ttft_p50_ms": p50 * 1000,
        "ttft_p90_ms": p90 * 1000,
        "itl_p50_ms": (0.01 + (0.025 - 0.01) * 0.5) * 1000,  # all 40 in (0.010, 0.025]
        "prefix_cache_hit_pct": 100 * s["hits"] / s["queries"],
        "kv_cache_pct": float((i * 7) % 90 + 5),
        "running": float((i * 3) % 8),
        "waiting": float(i % 3),
        "gen_per_scrape": s["gen"],
    }


def _vllm_engines(p: Profile, n: int) -> list[dict[str, float]]:
    """Each engine's numbers after ``n`` scrapes. One engine: the numbers of
    :func:`expected_vllm`. Two (a data-parallel server, ``engine="0"`` and ``"1"``): every
    counter and histogram split between them so that their sums are those numbers, the KV
    gauge 5 points below the expected % on one and 5 above on the other (so the mean is
    it, the sum is not), and running/waiting split so that they sum to the expected."""
    e, s = expected_vllm(p.i), vllm_steps(p.i)
    one = {
        "running": e["running"],
        "waiting": e["waiting"],
        "kv": e["kv_cache_pct"],
        "queries": s["queries"] * n,
        "hits": s["hits"] * n,
        "prompt": s["prompt"] * n,
        "gen": 1000 * p.i + s["gen"] * n,
        "ttft_lo": 4.0 * n,  # observations in TTFT bucket k (see _ttft_bucket)
        "ttft_hi": 6.0 * n,  # ... and in bucket k + 1
        "ttft_sum": 0.1 * n,
        "itl": 40.0 * n,
        "itl_sum": 0.7 * n,
    }
    if p.engines == 1:
        return [one]
    if p.engines != 2:
        raise ValueError("the vLLM fixture has 1 or 2 engines")
    first = {
        "running": e["running"] - e["running"] // 2,
        "waiting": e["waiting"],
        "kv": e["kv_cache_pct"] - 5,
        "queries": 60.0 * n,
        "hits": (s["hits"] - 5) * n,
        "prompt": 120.0 * n,
        "gen": 1000 * p.i + (s["gen"] - 20) * n,
        "ttft_lo": 4.0 * n,  # all of bucket k on engine 0, all of bucket k + 1 on engine 1
        "ttft_hi": 0.0,
        "ttft_sum": 0.04 * n,
        "itl": 30.0 * n,
        "itl_sum": 0.5 * n,
    }
    second = {k: one[k] - first[k] for k in one}
    second["kv"] = e["kv_cache_pct"] + 5
    return [first, second]


def vllm_metrics(p: Profile, n: int) -> str:
    k = _ttft_bucket(p.i)
    engines = _vllm_engines(p, n)
    labs = [f'model_name="{p.model}",engine="{j}"' for j in range(len(engines))]

    def series(name: str, kind: str, key: str, per: float = 1.0) -> list[str]:
        out = [f"# TYPE {name.removesuffix('_total')} {kind}"]
        out += [f"{name}{{{lab}}} {v[key] / per}" for lab, v in zip(labs, engines)]
        return out

    parts = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        *series("vllm:num_requests_running", "gauge", "running"),
        *series("vllm:num_requests_waiting", "gauge", "waiting"),
        *series("vllm:kv_cache_usage_perc", "gauge", "kv", 100),
        *series("vllm:prefix_cache_queries_total", "counter", "queries"),
        *series("vllm:prefix_cache_hits_total", "counter", "hits"),
        *series("vllm:prompt_tokens_total", "counter", "prompt"),
        *series("vllm:generation_tokens_total", "counter", "gen"),
    ]
    ttft, itl = [], []
    for lab, v in zip(labs, engines):
        counts = [0.0] * len(TTFT_BOUNDS)
        counts[k], counts[k + 1] = v["ttft_lo"], v["ttft_hi"]
        ttft.append((lab, counts, v["ttft_sum"]))
        counts = [0.0] * len(ITL_BOUNDS)
        counts[1] = v["itl"]
        itl.append((lab, counts, v["itl_sum"]))
    parts += [
        _histograms("vllm:time_to_first_token_seconds", TTFT_BOUNDS, ttft),
        _histograms("vllm:inter_token_latency_seconds", ITL_BOUNDS, itl),
    ]
    return "\n".join(parts) + "\n"


def llamacpp_metrics(p: Profile, n: int) -> str:
    gen = 40.0 + p.i % 7
    values = {
        ("prompt_tokens_total", "counter"): 100.0 * n,
        ("prompt_tokens_cached_total", "counter"): 30.0 * n,
        ("prompt_seconds_total", "counter"): 0.5 * n,
        ("tokens_predicted_total", "counter"): gen * n,
        ("tokens_predicted_seconds_total", "counter"): gen * n * 0.012,
        ("n_decode_total", "counter"): gen * n,
        ("prompt_tokens_seconds", "gauge"): 200.0,
        ("predicted_tokens_seconds", "gauge"): 83.3,
        ("requests_processing", "gauge"): float(p.i % 2),
        ("requests_deferred", "gauge"): 0.0,
    }
    out = []
    for (name, kind), v in values.items():
        out += [f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {v}"]
    return "\n".join(out) + "\n"


def dcgm_metrics(p: Profile, n: int) -> str:
    fields: dict[str, tuple[str, Callable[[int], float]]] = {
        "DCGM_FI_DEV_SM_CLOCK": ("SM frequency (in MHz).", lambda g: 1980),
        "DCGM_FI_DEV_MEM_CLOCK": ("Memory frequency (in MHz).", lambda g: 2619),
        "DCGM_FI_DEV_GPU_TEMP": ("GPU temperature (in C).", lambda g: 40 + g),
        "DCGM_FI_DEV_POWER_USAGE": ("Power draw (in W).", lambda g: 300.5 + 10 * g),
        "DCGM_FI_DEV_GPU_UTIL": ("GPU utilization (in %).", lambda g: (10 * g + 7 * p.i) % 100),
        "DCGM_FI_DEV_FB_FREE": ("Framebuffer memory free (in MiB).", lambda g: _fb_free(g)),
        "DCGM_FI_DEV_FB_USED": ("Framebuffer memory used (in MiB).", lambda g: _fb_used(g)),
        # a counter: mJ since the driver loaded; ENERGY_PER_SCRAPE_J more at each scrape
        DCGM_ENERGY: (
            "Total energy consumption since boot (in mJ).",
            lambda g: 1_000_000 + 1000 * ENERGY_PER_SCRAPE_J * n,
        ),
    }
    out = []
    for name, (help_text, value) in fields.items():
        kind = "counter" if name == DCGM_ENERGY else "gauge"
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for g in range(p.gpus):
            uuid = f"GPU-{p.i:04d}{g:04d}-0000-0000-0000-000000000000"
            labels = (
                f'gpu="{g}",UUID="{uuid}",device="nvidia{g}",modelName="{GPU_MODEL}",'
                f'Hostname="{p.host}",DCGM_FI_DRIVER_VERSION="550.54.15"'
            )
            out.append(f"{name}{{{labels}}} {value(g)}")
    return "\n".join(out) + "\n"


DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
ENERGY_PER_SCRAPE_J = 400  # per GPU: 400 W when scraped once a second


def _fb_used(g: int) -> int:
    return 20000 + 1000 * g


def _fb_free(g: int) -> int:
    return FB_TOTAL_MIB - _fb_used(g)


RENDER: dict[str, Callable[[Profile, int], str]] = {
    "vllm": vllm_metrics,
    "llama-server": llamacpp_metrics,
    "dcgm": dcgm_metrics,
}


class FixtureEndpoint(PaceServer):
    """One port: the profile's /metrics and detection answers; chat as the pace server."""

    def __init__(self, profile: Profile) -> None:
        super().__init__(PaceConfig(interval_ms=5, ttft_ms=20, tokens=8, model=profile.model))
        self.profile = profile
        self.scrapes = 0

    async def _handle(self, req: HttpRequest, writer: asyncio.StreamWriter) -> None:
        p, ka = self.profile, req.keep_alive
        if req.method == "GET" and req.path == "/metrics":
            self.scrapes += 1
            data = RENDER[p.kind](p, self.scrapes).encode()
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                f"Content-Length: {len(data)}\r\n"
                f"Connection: {'keep-alive' if ka else 'close'}\r\n\r\n"
            )
            writer.write(head.encode() + data)
            return await writer.drain()
        if p.kind == "dcgm":
            return await self._json(writer, "404 Not Found", {"error": "not found"}, ka)
        if req.method == "GET" and req.path == "/v1/models":
            owner = "vllm" if p.kind == "vllm" else "llamacpp"
            model = {"id": p.model, "object": "model", "owned_by": owner}
            return await self._json(writer, "200 OK", {"object": "list", "data": [model]}, ka)
        if p.kind == "vllm" and req.method == "GET" and req.path == "/version":
            return await self._json(writer, "200 OK", {"version": "0.32.0-fixture"}, ka)
        if p.kind == "llama-server" and req.method == "GET" and req.path == "/props":
            body = {"total_slots": 1, "default_generation_settings": {}, "build_info": "fixture"}
            return await self._json(writer, "200 OK", body, ka)
        if req.method == "GET" and req.path in ("/api/version", "/props", "/version"):
            return await self._json(writer, "404 Not Found", {"error": "not found"}, ka)
        await super()._handle(req, writer)


class FixtureFleet:
    """Serve many profiles from one loop on one thread; ``urls[i]`` is profile i's."""

    def __init__(self, profiles: list[Profile], host: str = "127.0.0.1") -> None:
        self.endpoints = [FixtureEndpoint(p) for p in profiles]
        self.host = host
        self.ports: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None

    @property
    def urls(self) -> list[str]:
        return [f"http://{self.host}:{port}" for port in self.ports]

    def start(self) -> FixtureFleet:
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            for e in self.endpoints:
                self.ports.append(self._loop.run_until_complete(e.start(self.host, 0)))
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fleet-fixture", daemon=True)
        self._thread.start()
        if not started.wait(30):
            raise RuntimeError("fleet fixture did not start")
        return self

    def stop(self) -> None:
        async def stop_all() -> None:
            await asyncio.gather(*(e.stop() for e in self.endpoints))

        asyncio.run_coroutine_threadsafe(stop_all(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="serve fleet fixture endpoints")
    ap.add_argument("--vllm", type=int, default=200, help="vLLM-like endpoints")
    ap.add_argument("--dcgm-hosts", type=int, default=25, help="DCGM exporters (one per host)")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per DCGM exporter")
    args = ap.parse_args(argv)
    profiles = [Profile("vllm", i, model=f"model-{i % 4}") for i in range(args.vllm)]
    profiles += [
        Profile("dcgm", h, host=f"node-{h:03d}", gpus=args.gpus) for h in range(args.dcgm_hosts)
    ]
    fleet = FixtureFleet(profiles).start()
    vllm_ports = fleet.ports[: args.vllm]
    print(json.dumps({"vllm": vllm_ports, "dcgm": fleet.ports[args.vllm :]}), flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())


def fixed_rows() -> list:  # type: ignore[type-arg]
    """Rows with fixed numbers, made by the real code from fixture text read at fixed
    times (for snapshots and unit tests): six vLLM endpoints on two hosts with GPUs, one
    llama-server, one down endpoint."""
    from tui.fleet.direct import fill_llamacpp, fill_vllm
    from tui.fleet.rows import EndpointRow, GpuRow
    from tui.transport.prometheus import parse

    rows = []
    for i in range(6):
        p = Profile("vllm", i, model=["Qwen2.5-7B-Instruct", "Llama-3.1-8B"][i % 2])
        row = EndpointRow(f"gpu{i // 3 + 1}-vllm{i % 3}", f"http://10.0.0.{i // 3 + 1}:{8000 + i}")
        row.kind, row.up, row.host = "vllm", True, f"10.0.0.{i // 3 + 1}"
        fill_vllm(row, parse(vllm_metrics(p, 3), t=100.0), parse(vllm_metrics(p, 5), t=102.0))
        rows.append(row)
    p = Profile("llama-server", 3)
    row = EndpointRow("laptop-llama", "http://10.0.0.9:8080", kind="llama-server", up=True)
    row.model, row.host = "SmolLM2-135M-Instruct.Q4_1.gguf", "10.0.0.9"
    fill_llamacpp(
        row, parse(llamacpp_metrics(p, 3), t=100.0), parse(llamacpp_metrics(p, 5), t=102.0)
    )
    rows.append(row)
    rows.append(
        EndpointRow(
            "gpu3-vllm0",
            "http://10.0.0.3:8000",
            kind="vllm",
            up=False,
            error="connection refused by 10.0.0.3:8000 (is the server running?)",
            host="10.0.0.3",
        )
    )
    for h in (1, 2):
        gpus = [
            GpuRow(
                host=f"gpu{h}",
                gpu=str(g),
                uuid=f"GPU-{h}{g}",
                model=GPU_MODEL,
                util_pct=float((10 * g + 7 * h) % 100),
                mem_used_mib=float(_fb_used(g)),
                mem_free_mib=float(_fb_free(g)),
                power_w=300.5 + 10 * g,
                temp_c=40.0 + g,
                sm_clock_mhz=1980.0,
                mem_clock_mhz=2619.0,
            )
            for g in range(4)
        ]
        for row in rows:
            if row.host == f"10.0.0.{h}":
                row.gpus = gpus
    return rows
