"""From the readers' dicts to samples: one GPU dict → :class:`GpuSample`, energy dicts →
:class:`EnergyReading`.

The dicts are the agent's line format (tui/telemetry/devices/agent.py documents the fields): the
remote agent sends them, and this machine's AMD, Apple and RAPL readers (which are
bundled into that agent) return them too. Whatever made them, nothing is trusted: a field
of the wrong type, a number that is not finite or out of range reads as unknown (None);
text is cut short and made printable.
"""

from __future__ import annotations

import math
from typing import Any

from tui.core.energy import EnergyReading
from tui.telemetry.devices.nvml import BANDWIDTH_SOURCE, GpuProcess, GpuSample, peak_bandwidth_bps

MAX_ITEMS = 4096  # cores, GPUs, processes or energy domains kept from one reading
_TEXT = 200
VENDORS = ("nvidia", "amd", "apple")


def gpu_from_dict(position: int, d: Any) -> GpuSample | None:
    """One GPU (``position``: its place in the list, the index when it names none)."""
    if not isinstance(d, dict):
        return None
    index = as_int(d.get("index"))
    procs = []
    for p in as_list(d.get("processes")):
        if isinstance(p, dict) and as_int(p.get("pid")) is not None:
            procs.append(
                GpuProcess(
                    pid=as_int(p.get("pid")) or 0,
                    name=as_str(p.get("name")),
                    bytes=as_int(p.get("bytes")),
                )
            )
    vendor = d.get("vendor") if d.get("vendor") in VENDORS else "nvidia"
    name = as_str(d.get("name")) or "GPU"
    peak = peak_bandwidth_bps(as_int(d.get("bus_width_bits")), as_int(d.get("max_mem_clock_mhz")))
    peak_source = BANDWIDTH_SOURCE if peak else None
    cores = as_int(d.get("gpu_cores"))
    if vendor == "apple":
        from tui.telemetry.devices.apple_chips import chip_bandwidth

        chip = chip_bandwidth(name, cores)
        if chip is not None:
            peak, peak_source = chip.bandwidth_bps, f"Apple chip table: {chip.describe()}"
    util = as_num(d.get("util_percent"))
    return GpuSample(
        index=position if index is None else index,
        name=name,
        util_percent=None if util is None else clamp(util),
        mem_used=as_int(d.get("mem_used")),
        mem_total=as_int(d.get("mem_total")),
        power_w=as_num(d.get("power_w")),
        temp_c=as_num(d.get("temp_c")),
        sm_clock_mhz=as_int(d.get("sm_clock_mhz")),
        mem_clock_mhz=as_int(d.get("mem_clock_mhz")),
        peak_bandwidth_bps=peak,
        processes=tuple(procs),
        vendor=str(vendor),
        unified_memory=d.get("unified_memory") is True,
        energy_j=as_nonneg(d.get("energy_j")),
        energy_source=as_str(d.get("energy_source")),
        power_source=as_str(d.get("power_source")),
        gpu_cores=cores,
        mem_total_source=as_str(d.get("mem_total_source")),
        peak_bandwidth_source=peak_source,
        note=as_str(d.get("note")),
    )


def energy_from_dicts(items: Any) -> tuple[EnergyReading, ...]:
    """Energy readings (CPU packages, macmon's CPU power) from their dicts."""
    out = []
    for e in as_list(items):
        if not isinstance(e, dict):
            continue
        domain = as_str(e.get("domain"))
        joules, watts = as_nonneg(e.get("joules")), as_nonneg(e.get("watts"))
        if not domain or (joules is None and watts is None):
            continue
        wrap = as_nonneg(e.get("wrap_j"))
        out.append(
            EnergyReading(
                domain=domain,
                joules=joules,
                watts=watts,
                counter_source=as_str(e.get("counter_source")),
                power_source=as_str(e.get("power_source")),
                wrap_j=wrap or None,
            )
        )
    return tuple(out)


def as_num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def as_nonneg(v: Any) -> float | None:
    f = as_num(v)
    return f if f is not None and f >= 0 else None


def as_int(v: Any) -> int | None:
    f = as_num(v)
    return int(f) if f is not None and f >= 0 else None


def clamp(p: float) -> float:
    return max(0.0, min(100.0, p))


def as_list(v: Any) -> list[Any]:
    return v[:MAX_ITEMS] if isinstance(v, list) else []


def as_str(v: Any) -> str | None:
    return printable(v) if isinstance(v, str) else None


def printable(s: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in s[:_TEXT])
