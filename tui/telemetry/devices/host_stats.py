"""CPU and memory of the host the agent runs on, with or without psutil.

Stdlib only, Python 3.6 syntax, no annotations (types are PEP 484 type comments): bundled
into the agent fed to a remote ``python3`` (tui/telemetry/devices/agent.py); every top-level name
is unique across the bundle.
Without psutil, CPU use comes from /proc/stat deltas and memory from /proc/meminfo.
"""

import os
import platform

if False:  # typing only (never runs): names for the type comments, read by mypy alone
    from typing import Any  # noqa: F401


def is_apple_silicon():  # type: () -> bool
    return platform.system() == "Darwin" and platform.machine() in ("arm64", "aarch64")


# -- CPU ----------------------------------------------------------------------------------
def read_proc_stat(path="/proc/stat"):  # type: (str) -> list[tuple[int, int]]
    """[(busy, total)] jiffies: the all-CPU line first, then cpu0, cpu1, ...

    total = user + nice + system + idle + iowait + irq + softirq + steal (guest time is
    already inside user and nice); busy = total − idle − iowait.
    """
    rows = []  # type: list[tuple[int, int]]
    with open(path) as f:
        for line in f:
            if not line.startswith("cpu"):
                continue
            fields = line.split()
            values = [int(x) for x in fields[1:9]]
            values += [0] * (8 - len(values))
            total = sum(values)
            rows.append((total - values[3] - values[4], total))
    return rows


def cpu_percent_between(before, after):
    # type: (list[tuple[int, int]], list[tuple[int, int]]) -> tuple[float | None, list[float]]
    """(total %, [per core %]) from two read_proc_stat() readings."""
    out = []  # type: list[float]
    for (b0, t0), (b1, t1) in zip(before, after):
        dt = t1 - t0
        out.append(0.0 if dt <= 0 else max(0.0, min(100.0, 100.0 * (b1 - b0) / dt)))
    if not out:
        return None, []
    return out[0], out[1:]


class CpuReader:
    def __init__(self, psutil_module):  # type: (Any) -> None
        self._psutil = psutil_module
        self._prev = []  # type: list[tuple[int, int]]  # the last /proc/stat reading
        self.via = "none"
        if psutil_module is not None:
            psutil_module.cpu_percent(interval=None)
            psutil_module.cpu_percent(interval=None, percpu=True)
            self.via = "psutil"
        elif os.path.exists("/proc/stat"):
            self._prev = read_proc_stat()
            self.via = "proc"

    def read(self):  # type: () -> dict[str, Any] | None
        if self.via == "psutil":
            total = self._psutil.cpu_percent(interval=None)
            per_core = self._psutil.cpu_percent(interval=None, percpu=True)
            return {"percent": float(total), "per_core": [float(x) for x in per_core]}
        if self.via == "proc":
            now = read_proc_stat()
            total, per_core = cpu_percent_between(self._prev, now)
            self._prev = now
            if total is None:
                return None
            return {"percent": round(total, 2), "per_core": [round(x, 2) for x in per_core]}
        return None


# -- memory ---------------------------------------------------------------------------------
def read_meminfo(path="/proc/meminfo"):  # type: (str) -> tuple[int, int]
    """(used, total) bytes from /proc/meminfo: used = MemTotal − MemAvailable."""
    fields = {}  # type: dict[str, int]
    with open(path) as f:
        for line in f:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                fields[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    total = fields["MemTotal"]
    available = fields.get("MemAvailable")
    if available is None:  # kernels before 3.14
        available = fields.get("MemFree", 0) + fields.get("Buffers", 0) + fields.get("Cached", 0)
    return total - available, total


def read_memory(psutil_module, label):  # type: (Any, str) -> dict[str, Any] | None
    if psutil_module is not None:
        vm = psutil_module.virtual_memory()
        return {"used": int(vm.total - vm.available), "total": int(vm.total), "label": label}
    if os.path.exists("/proc/meminfo"):
        used, total = read_meminfo()
        return {"used": used, "total": total, "label": label}
    return None
