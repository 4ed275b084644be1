"""A remote host's hardware from a Prometheus exporter URL (``http(s)://HOST:PORT[/metrics]``).

Each tick scrapes the URL and tells the exporter apart by its metric names (one scrape
may hold more than one, e.g. a federating endpoint):

- NVIDIA's DCGM exporter (``DCGM_FI_DEV_*``; default port 9400): per ``gpu`` label,
  ``DCGM_FI_DEV_GPU_UTIL`` %, ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` (and
  ``DCGM_FI_DEV_FB_RESERVED`` where exported) MiB — memory total = used + free + reserved —
  ``DCGM_FI_DEV_POWER_USAGE`` W, ``DCGM_FI_DEV_GPU_TEMP`` °C, ``DCGM_FI_DEV_SM_CLOCK`` /
  ``DCGM_FI_DEV_MEM_CLOCK`` MHz, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` mJ since the
  driver was loaded (the energy counter J/token is read from; in dcgm-exporter's default
  counters); the name from ``modelName``, the host from ``Hostname``.
- node_exporter (``node_*``; default port 9100): CPU % total and per core from the
  differences of ``node_cpu_seconds_total{cpu,mode}`` between two scrapes (busy = all
  modes but idle and iowait; so the first scrape only primes it), RAM used =
  ``node_memory_MemTotal_bytes`` − ``node_memory_MemAvailable_bytes``.
- nvitop's exporter (prometheus_client gauges created with a unit, so the unit is in the
  name): ``gpu_utilization_Percentage``, ``gpu_memory_used_MiB``, ``gpu_memory_total_MiB``,
  ``gpu_power_usage_W``, ``gpu_temperature_C``, ``gpu_clock_sm_MHz``,
  ``gpu_clock_memory_MHz`` (labels hostname, index, devicename, uuid),
  ``host_cpu_percent_Percentage``, ``host_virtual_memory_used_MiB`` and
  ``host_virtual_memory_total_MiB`` (psutil's "used", which is not total − available).

None of these exports a GPU's peak memory bandwidth: the roofline line then uses
``telemetry.peak_bandwidth_gbs`` from config, or shows no percentage. A failed scrape,
or a page with none of these metrics, is link trouble with backoff, like SSH
(tui/telemetry/remote/remote_link.py). DCGM and nvitop need an NVIDIA GPU to run: their tests
serve fixtures written from these documented names.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from tui.core.safe_text import terminal_label
from tui.telemetry.devices.nvml import ABSENT, OK, GpuSample, NvmlSample
from tui.telemetry.remote.remote_link import LinkLost, RemoteLink
from tui.telemetry.sampler import TelemetrySample
from tui.telemetry.system import SystemSample
from tui.transport.access import HttpAccess
from tui.transport.prometheus import Labels, Scrape, ScrapeError, get_text, parse

MIB = 2**20
DCGM, NODE, NVITOP = "dcgm", "node_exporter", "nvitop"
DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
NOTHING_KNOWN = (
    "no known exporter metrics here (expected DCGM_FI_DEV_*, node_cpu_seconds_total or "
    "nvitop's gpu_utilization_Percentage)"
)


@dataclass(frozen=True)
class ExporterReading:
    kinds: tuple[str, ...]  # which exporters the scrape held
    system: SystemSample | None
    gpu: NvmlSample
    primed_only: bool = False  # node_exporter's first scrape: no CPU difference yet


def exporter_kinds(scrape: Scrape) -> tuple[str, ...]:
    names = scrape.samples
    kinds = []
    if any(n.startswith("DCGM_FI_DEV_") for n in names):
        kinds.append(DCGM)
    if "node_cpu_seconds_total" in names or "node_memory_MemTotal_bytes" in names:
        kinds.append(NODE)
    if "gpu_utilization_Percentage" in names or "host_cpu_percent_Percentage" in names:
        kinds.append(NVITOP)
    return tuple(kinds)


def read_exporters(scrape: Scrape, previous: Scrape | None, gpu: bool = True) -> ExporterReading:
    """What one scrape says (``previous``: the scrape before, for CPU differences)."""
    kinds = exporter_kinds(scrape)
    if not kinds:
        raise LinkLost(NOTHING_KNOWN)
    system: SystemSample | None = None
    primed_only = False
    if NODE in kinds:
        system = node_system(scrape, previous)
        primed_only = system is None and "node_cpu_seconds_total" in scrape.samples
    if system is None and NVITOP in kinds:
        system = nvitop_system(scrape)
    gpus: list[GpuSample] = []
    if DCGM in kinds:
        gpus = dcgm_gpus(scrape)
    elif NVITOP in kinds:
        gpus = nvitop_gpus(scrape)
    if not gpu:
        status = NvmlSample(ABSENT, "GPU sampling off")
    elif gpus:
        status = NvmlSample(OK, f"{len(gpus)} NVIDIA GPU(s)", gpus)
    elif DCGM in kinds or NVITOP in kinds:
        status = NvmlSample(ABSENT, "no NVIDIA GPU in this exporter's metrics")
    else:
        status = NvmlSample(ABSENT, f"no GPU metrics ({', '.join(kinds)})")
    return ExporterReading(kinds, system, status, primed_only)


# -- node_exporter -----------------------------------------------------------------------------
def node_cpu(previous: Scrape, scrape: Scrape) -> tuple[float, list[float]] | None:
    """(total %, per core %) busy between two scrapes of node_cpu_seconds_total."""
    cur = _cpu_times(scrape)
    prev = _cpu_times(previous)
    per_core: list[tuple[int, float]] = []
    busy_sum = total_sum = 0.0
    for cpu, (idle1, total1) in cur.items():
        if cpu not in prev:
            continue
        idle0, total0 = prev[cpu]
        d_total, d_idle = total1 - total0, idle1 - idle0
        if d_total <= 0 or d_idle < 0:
            continue  # no time passed for it, or the host rebooted
        busy = max(0.0, d_total - d_idle)
        per_core.append((cpu, min(100.0, 100.0 * busy / d_total)))
        busy_sum += busy
        total_sum += d_total
    if total_sum <= 0:
        return None
    per_core.sort()
    return min(100.0, 100.0 * busy_sum / total_sum), [p for _, p in per_core]


def _cpu_times(scrape: Scrape) -> dict[int, tuple[float, float]]:
    """cpu -> (idle + iowait seconds, all seconds)."""
    out: dict[int, tuple[float, float]] = {}
    for labels, value in scrape.samples.get("node_cpu_seconds_total", {}).items():
        d = dict(labels)
        try:
            cpu = int(d.get("cpu", ""))
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        idle, total = out.get(cpu, (0.0, 0.0))
        if d.get("mode") in ("idle", "iowait"):
            idle += value
        out[cpu] = (idle, total + value)
    return out


def node_system(scrape: Scrape, previous: Scrape | None) -> SystemSample | None:
    """CPU and RAM from node_exporter; None until two scrapes give a CPU difference."""
    cpu = node_cpu(previous, scrape) if previous is not None else None
    if cpu is None:
        return None
    total = _one(scrape, "node_memory_MemTotal_bytes")
    available = _one(scrape, "node_memory_MemAvailable_bytes")
    return SystemSample(
        cpu_percent=cpu[0],
        per_core=cpu[1],
        ram_used=int(total - available) if total and available is not None else 0,
        ram_total=int(total or 0),
    )


# -- DCGM --------------------------------------------------------------------------------------
def dcgm_gpus(scrape: Scrape) -> list[GpuSample]:
    by_gpu: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    for metric in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        DCGM_ENERGY,
        # a counter typed "counter" reaches us as NAME_total (the text parser's naming)
        DCGM_ENERGY + "_total",
    ):
        for labels, value in scrape.samples.get(metric, {}).items():
            d = dict(labels)
            key = d.get("gpu") or d.get("UUID") or d.get("device") or "0"
            by_gpu.setdefault(key, {})[metric.removesuffix("_total")] = value
            if d.get("modelName"):
                names[key] = terminal_label(d["modelName"], 80)  # an exporter label
    out = []
    for position, key in enumerate(sorted(by_gpu, key=_index_key)):
        m = by_gpu[key]
        used = _finite(m.get("DCGM_FI_DEV_FB_USED"))
        free = _finite(m.get("DCGM_FI_DEV_FB_FREE"))
        reserved = _finite(m.get("DCGM_FI_DEV_FB_RESERVED")) or 0.0
        total = used + free + reserved if used is not None and free is not None else None
        power = _finite(m.get("DCGM_FI_DEV_POWER_USAGE"))
        energy_mj = _finite(m.get(DCGM_ENERGY))
        energy_mj = energy_mj if energy_mj is not None and energy_mj >= 0 else None
        out.append(
            GpuSample(
                index=int(key) if key.isascii() and key.isdigit() else position,
                name=names.get(key, "NVIDIA GPU"),
                util_percent=_finite(m.get("DCGM_FI_DEV_GPU_UTIL")),
                mem_used=None if used is None else int(used * MIB),
                mem_total=None if total is None else int(total * MIB),
                power_w=power,
                temp_c=_finite(m.get("DCGM_FI_DEV_GPU_TEMP")),
                sm_clock_mhz=_mhz(m.get("DCGM_FI_DEV_SM_CLOCK")),
                mem_clock_mhz=_mhz(m.get("DCGM_FI_DEV_MEM_CLOCK")),
                energy_j=None if energy_mj is None else energy_mj / 1000.0,
                energy_source=None if energy_mj is None else DCGM_ENERGY,
                power_source=None if power is None else "DCGM_FI_DEV_POWER_USAGE",
            )
        )
    return out


# -- nvitop ------------------------------------------------------------------------------------
NVITOP_GPU = {
    "gpu_utilization_Percentage": "util",
    "gpu_memory_used_MiB": "used",
    "gpu_memory_total_MiB": "total",
    "gpu_power_usage_W": "power",
    "gpu_temperature_C": "temp",
    "gpu_clock_sm_MHz": "sm",
    "gpu_clock_memory_MHz": "mem_clock",
}


def nvitop_gpus(scrape: Scrape) -> list[GpuSample]:
    by_gpu: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    for metric, field in NVITOP_GPU.items():
        for labels, value in scrape.samples.get(metric, {}).items():
            d = dict(labels)
            key = d.get("index") or d.get("uuid") or "0"
            by_gpu.setdefault(key, {})[field] = value
            if d.get("devicename"):
                names[key] = terminal_label(d["devicename"], 80)
    out = []
    for position, key in enumerate(sorted(by_gpu, key=_index_key)):
        m = by_gpu[key]
        used, total = _finite(m.get("used")), _finite(m.get("total"))
        power = _finite(m.get("power"))
        out.append(
            GpuSample(
                index=int(key) if key.isascii() and key.isdigit() else position,
                name=names.get(key, "NVIDIA GPU"),
                util_percent=_finite(m.get("util")),
                mem_used=None if used is None else int(used * MIB),
                mem_total=None if total is None else int(total * MIB),
                power_w=power,
                temp_c=_finite(m.get("temp")),
                sm_clock_mhz=_mhz(m.get("sm")),
                mem_clock_mhz=_mhz(m.get("mem_clock")),
                power_source=None if power is None else "nvitop gpu_power_usage_W",
            )
        )
    return out


def nvitop_system(scrape: Scrape) -> SystemSample | None:
    cpu = _finite(_one(scrape, "host_cpu_percent_Percentage"))
    if cpu is None:
        return None
    used = _finite(_one(scrape, "host_virtual_memory_used_MiB"))
    total = _finite(_one(scrape, "host_virtual_memory_total_MiB"))
    return SystemSample(
        cpu_percent=max(0.0, min(100.0, cpu)),
        per_core=[],
        ram_used=int((used or 0) * MIB),
        ram_total=int((total or 0) * MIB),
    )


# -- helpers -----------------------------------------------------------------------------------
def _one(scrape: Scrape, name: str) -> float | None:
    """The first series of ``name`` (these exporters report one per host)."""
    series: dict[Labels, float] = scrape.samples.get(name, {})
    for value in series.values():
        return value
    return None


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def _mhz(v: float | None) -> int | None:
    f = _finite(v)
    return None if f is None else int(round(f))


def _index_key(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isascii() and key.isdigit() else (1 << 30, key)


# -- the source --------------------------------------------------------------------------------
class ExporterSource(RemoteLink):
    """Scrapes ``url`` every interval in the link's thread (see the module docstring)."""

    def __init__(
        self,
        url: str,
        interval_s: float = 0.5,
        gpu: bool = True,
        access: HttpAccess | None = None,
        timeout_s: float | None = None,
        backoff_s: tuple[float, ...] | None = None,
    ) -> None:
        super().__init__(url, interval_s, backoff_s)
        self.url = url
        self.gpu = gpu
        self.access = access
        self.timeout_s = timeout_s if timeout_s is not None else min(5.0, max(1.0, interval_s * 4))
        self.kinds: tuple[str, ...] = ()

    def session(self) -> None:
        previous: Scrape | None = None
        next_t = time.monotonic()
        while not self.stopping:
            try:
                scrape = parse(get_text(self.url, self.timeout_s, self.access))
            except ScrapeError as e:
                text = str(e)
                if text.startswith(self.url + ": "):
                    text = text[len(self.url) + 2 :]
                raise LinkLost(text) from None
            reading = read_exporters(scrape, previous, self.gpu)
            previous = scrape
            if reading.kinds != self.kinds:
                self.kinds = reading.kinds
                self.label = f"{'+'.join(reading.kinds)} {self.url}"
            if not reading.primed_only:
                self.deliver(
                    TelemetrySample(scrape.t, reading.system, reading.gpu, None, source=self.label)
                )
            next_t += self.interval_s
            now = time.monotonic()
            if now > next_t + self.interval_s:
                next_t = now  # a slow scrape: do not burst
            if self.wait(next_t - now):
                return
