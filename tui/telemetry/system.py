"""CPU, RAM and engine-process RSS via psutil.

Definitions: ``cpu_percent`` is the share of all cores busy since the previous sample
(0–100); ``per_core`` the same per logical core; ``ram_used`` = total − available (bytes);
``rss_bytes`` the resident set size of the engine process (our own PID for in-process
engines, the server's PID for local servers), None when that process is gone;
``energy`` the CPU's energy readings: each package's RAPL counter (Linux powercap,
tui/telemetry/devices/rapl.py) where readable, macmon's CPU power on a Mac; ``energy_note`` why
there are none where a source exists but cannot be read; ``cpu_shares`` infertop's own
CPU beside the engine process's (tui/telemetry/own_cpu.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import psutil

from tui.core.energy import EnergyReading
from tui.telemetry.device_dicts import energy_from_dicts
from tui.telemetry.devices.apple import memory_label
from tui.telemetry.devices.rapl import read_rapl
from tui.telemetry.own_cpu import CpuShares, OwnCpu


@dataclass(frozen=True)
class SystemSample:
    cpu_percent: float
    per_core: list[float] = field(default_factory=list)
    ram_used: int = 0
    ram_total: int = 0
    ram_label: str = "RAM"
    rss_bytes: int | None = None
    rss_pid: int | None = None
    rss_error: str | None = None
    energy: tuple[EnergyReading, ...] = ()
    energy_note: str | None = None
    cpu_shares: CpuShares | None = None

    @property
    def ram_percent(self) -> float:
        return 100.0 * self.ram_used / self.ram_total if self.ram_total else 0.0


class SystemProbe:
    """Reads psutil; the first CPU reading after construction is primed, not reported."""

    def __init__(self, rapl_root: str | None = "/") -> None:
        """``rapl_root``: where /sys is (tests: a fake tree); None reads no RAPL."""
        self._rapl_root = rapl_root
        psutil.cpu_percent(interval=None)
        psutil.cpu_percent(interval=None, percpu=True)
        self._label = memory_label()
        self._procs: dict[int, psutil.Process] = {}
        self._own = OwnCpu()

    def sample(self, pid: int | None = None) -> SystemSample:
        total = psutil.cpu_percent(interval=None)
        per_core = psutil.cpu_percent(interval=None, percpu=True)
        vm = psutil.virtual_memory()
        rss, err = self._rss(pid if pid is not None else os.getpid())
        energy: tuple[EnergyReading, ...] = ()
        note = None
        if self._rapl_root is not None:
            found, note = read_rapl(self._rapl_root)
            energy = energy_from_dicts(found)
        return SystemSample(
            cpu_percent=float(total),
            per_core=[float(x) for x in per_core],
            ram_used=int(vm.total - vm.available),
            ram_total=int(vm.total),
            ram_label=self._label,
            rss_bytes=rss,
            rss_pid=pid if pid is not None else os.getpid(),
            rss_error=err,
            energy=energy,
            energy_note=note,
            cpu_shares=self._own.read(pid),
        )

    def _rss(self, pid: int) -> tuple[int | None, str | None]:
        try:
            proc = self._procs.get(pid)
            if proc is None:
                proc = self._procs[pid] = psutil.Process(pid)
            return int(proc.memory_info().rss), None
        except psutil.NoSuchProcess:
            self._procs.pop(pid, None)
            return None, f"process {pid} is gone"
        except psutil.AccessDenied:
            return None, f"no access to process {pid}"
