"""``infertop doctor``'s hardware lines: every GPU found (NVIDIA, AMD, Apple) in the
hardware panel's row shape, where energy per token will come from, and which sources
were checked on real hardware (tui/telemetry/verified.py).

The checks take a hardware source (tests give one backed by fixtures); by default this
machine's (:class:`~tui.telemetry.sampler.LocalSource`), read twice, half a second apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tui.telemetry.devices.nvml import ERROR, GpuSample

Say = Callable[[str, str, str], None]
OK, MISSING, INFO = "ok", "--", "  "
VENDOR = {"nvidia": "NVIDIA GPU", "amd": "AMD GPU", "apple": "Apple GPU"}


def _gib(n: int | None) -> str:
    return "–" if n is None else f"{n / 2**30:.1f} GiB"


def gpu_line(g: GpuSample) -> str:
    """One GPU, as the doctor says it."""
    util = "–" if g.util_percent is None else f"{g.util_percent:.0f}%"
    if g.unified_memory:
        budget = (
            f"working-set budget {_gib(g.mem_total)} ({g.mem_total_source})"
            if g.mem_total is not None
            else "working-set budget unknown"
        )
        mem = f"GPU in use {_gib(g.mem_used)} of unified memory (RAM), {budget}"
    else:
        mem = f"memory {_gib(g.mem_used)} / {_gib(g.mem_total)}"
    parts = [f"GPU{g.index} {g.name} ({g.vendor}): util {util}, {mem}"]
    if g.gpu_cores:
        parts.append(f"{g.gpu_cores}-core GPU")
    if g.power_w is not None:
        parts.append(f"{g.power_w:.0f} W ({g.power_source or 'power'})")
    if g.peak_bandwidth_bps:
        parts.append(f"peak {g.peak_bandwidth_bps / 1e9:.0f} GB/s ({g.peak_bandwidth_source})")
    if g.note:
        parts.append(g.note)
    return "; ".join(parts)


def energy_line(g: GpuSample) -> tuple[str, str]:
    """(status, what J/token for this GPU will be read from)."""
    name = f"GPU{g.index}"
    if g.energy_j is not None:
        return OK, f"{name}: {g.energy_source} (counter)"
    if g.power_w is not None:
        return INFO, f"{name}: no energy counter: integrated from {g.power_source} (est.)"
    return MISSING, f"{name}: no energy counter and no power reading"


def check_hardware(say: Say, source: Any = None, wait_s: float = 0.5) -> None:
    """The GPU, energy and verification lines (``say(status, what, detail)``)."""
    if source is None:
        from tui.telemetry.sampler import LocalSource

        source = LocalSource()
    source.start()
    try:
        sample = source.sample(None)
        if wait_s:
            time.sleep(wait_s)
            sample = source.sample(None)
    finally:
        source.close()
    gpu = sample.gpu
    if not gpu.gpus:
        say(MISSING if gpu.status == ERROR else INFO, "GPU", gpu.message or "none")
    for g in gpu.gpus:
        say(OK, VENDOR.get(g.vendor, "GPU"), gpu_line(g))
    for g in gpu.gpus:
        status, detail = energy_line(g)
        say(status, "energy (GPU)", detail)
    system = sample.system
    if system is not None:
        for r in system.energy:
            how = (
                f"{r.counter_source} (counter)"
                if r.joules is not None
                else f"integrated from {r.power_source} (est.)"
            )
            say(OK, "energy (CPU)", f"{r.domain}: {how}")
        if not system.energy:
            say(INFO, "energy (CPU)", system.energy_note or "no RAPL counter or CPU power here")
    from tui.telemetry.verified import lines

    for text in lines():
        say(INFO, "verified on", text)
