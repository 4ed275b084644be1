"""An engine process's memory, read while its model is still loaded.

Definitions: ``rss_bytes`` = the process's resident set size now (psutil); ``peak_rss_bytes``
= its high-water mark since it started (Linux ``VmHWM`` in /proc/PID/status; None
elsewhere); ``gpu_bytes`` = the GPU memory NVML lists for that PID, summed over GPUs (None
with ``gpu_note`` saying why: no NVIDIA GPU, or the process holds none). ``shared`` is
true when the engine runs inside infertop's own process, whose memory then includes
infertop's too.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Footprint:
    pid: int | None
    rss_bytes: int | None
    peak_rss_bytes: int | None
    gpu_bytes: int | None
    gpu_note: str
    shared: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def peak_rss(pid: int) -> int | None:
    """VmHWM of a Linux process in bytes, or None where /proc does not have it."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024  # kB
    return None


def gpu_memory(pid: int) -> tuple[int | None, str]:
    """(bytes NVML lists for ``pid`` over all GPUs, note)."""
    from tui.telemetry.devices.nvml import OK, NvmlProbe

    sampler = NvmlProbe()
    try:
        sample = sampler.start()
        if sample.status != OK:
            return None, sample.message
        sample = sampler.sample(pid)
        if sample.status != OK:
            return None, sample.message
        held = [g.proc_mem for g in sample.gpus if g.proc_mem is not None]
        if not held:
            return None, "the process holds no GPU memory"
        return sum(held), ""
    finally:
        sampler.close()


def footprint(pid: int | None) -> Footprint:
    """The memory of process ``pid`` (None: unknown process, nothing measured)."""
    if pid is None:
        return Footprint(None, None, None, None, "engine process unknown", False)
    import psutil

    try:
        rss: int | None = int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError):
        rss = None
    gpu, note = gpu_memory(pid)
    return Footprint(pid, rss, peak_rss(pid), gpu, note, pid == os.getpid())
