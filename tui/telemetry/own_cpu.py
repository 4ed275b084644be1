"""infertop's own CPU beside the engine's: what watching costs, as top shows itself.

Shares of one core (100 % = one core busy the whole interval), over the interval since
the previous reading, from the kernel's per-thread CPU times (psutil):

- ``ui``: this process's main thread (Textual's event loop: layout, paint, our handlers);
- ``sampler``: the thread that takes the readings (the hardware sampler's);
- ``other``: every other thread of this process (HTTP engines' reader threads, the
  engine worker's pipe reader, Textual's writer thread);
- ``engine``: the engine's process when it is another one (the llama.cpp worker infertop
  starts, a local server's PID): its CPU is the engine's, not infertop's. None when the
  engine runs inside this process (its threads are then in ``other``) or elsewhere.

A machine with few cores (:data:`FEW_CORES` or fewer) running the engine too is flagged:
there every per cent infertop uses is taken from the engine.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import psutil

FEW_CORES = 4


@dataclass(frozen=True)
class CpuShares:
    """One reading (see the module docstring); percentages of one core."""

    ui: float
    sampler: float
    other: float
    engine: float | None = None
    engine_pid: int | None = None
    cores: int = 1
    interval_s: float = 0.0  # the interval the shares cover

    @property
    def own(self) -> float:
        """infertop's own share: UI + sampler + the other threads of its process."""
        return self.ui + self.sampler + self.other

    @property
    def shares_few_cores(self) -> bool:
        """The engine runs on this machine, which has few cores."""
        return self.engine_pid is not None and self.cores <= FEW_CORES

    def describe(self) -> str:
        """ "infertop 4.2% (UI 3.1, sampler 0.4, other 0.7) · engine 187% (pid 42)"."""
        text = (
            f"infertop {self.own:.1f}% (UI {self.ui:.1f}, sampler {self.sampler:.1f}, "
            f"other {self.other:.1f})"
        )
        if self.engine is not None:
            text += f" · engine {self.engine:.0f}% (pid {self.engine_pid})"
        return text


class OwnCpu:
    """Reads :class:`CpuShares`; call :meth:`read` from the sampling thread (its own
    CPU is then the ``sampler`` share). The first reading covers the time since
    construction."""

    def __init__(self) -> None:
        self._me = psutil.Process(os.getpid())
        self._main = threading.main_thread().native_id
        self._last: dict[int, float] = {}
        self._engine: psutil.Process | None = None
        self._engine_last = 0.0
        self._t = time.monotonic()
        self._cores = os.cpu_count() or 1
        self._threads_last = self._thread_times()

    def _thread_times(self) -> dict[int, float]:
        try:
            return {t.id: t.user_time + t.system_time for t in self._me.threads()}
        except (psutil.Error, OSError):
            return {}

    def read(self, engine_pid: int | None) -> CpuShares:
        """Shares since the previous reading. ``engine_pid``: the engine's process
        (this process's own PID, or None, when it has none of its own)."""
        now = time.monotonic()
        dt = max(now - self._t, 1e-6)
        times = self._thread_times()
        me = threading.get_native_id()
        ui = sampler = other = 0.0
        for tid, cpu in times.items():
            used = max(0.0, cpu - self._threads_last.get(tid, 0.0))
            if tid == self._main:
                ui += used
            elif tid == me:
                sampler += used
            else:
                other += used
        self._threads_last, self._t = times, now
        engine = None
        pid = engine_pid if engine_pid not in (None, os.getpid()) else None
        if pid is not None:
            engine = self._engine_share(pid, dt)
        return CpuShares(
            100 * ui / dt,
            100 * sampler / dt,
            100 * other / dt,
            engine,
            pid,
            self._cores,
            dt,
        )

    def _engine_share(self, pid: int, dt: float) -> float | None:
        try:
            if self._engine is None or self._engine.pid != pid:
                self._engine = psutil.Process(pid)
                self._engine_last = _cpu_of(self._engine)
                return None  # its first reading: no interval yet
            cpu = _cpu_of(self._engine)
        except (psutil.Error, OSError):
            self._engine = None
            return None
        used, self._engine_last = cpu - self._engine_last, cpu
        return 100 * max(0.0, used) / dt


def _cpu_of(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


@dataclass(frozen=True)
class ProcessCpu:
    """This process's CPU (every thread) over a window: ``cpu_s`` in ``wall_s``.
    ``engine_inside``: the engine ran in this process, so its work is in ``cpu_s``."""

    cpu_s: float
    wall_s: float
    engine_inside: bool = False
    helpers_cpu_s: float = 0.0  # infertop's helper processes (the bench's --workers)

    @property
    def percent(self) -> float:
        """Share of one core: (cpu_s + helpers_cpu_s) ÷ wall_s × 100."""
        return 100 * (self.cpu_s + self.helpers_cpu_s) / self.wall_s if self.wall_s > 0 else 0.0

    def describe(self) -> str:
        where = (
            "the engine runs in this process: included"
            if self.engine_inside
            else "the engine's own process not included"
        )
        helpers = f" + {self.helpers_cpu_s:.2f} s in worker processes" if self.helpers_cpu_s else ""
        return (
            f"infertop's own CPU: {self.percent:.1f}% of a core ({self.cpu_s:.2f} s{helpers} "
            f"in {self.wall_s:.2f} s; {where})"
        )

    def to_dict(self) -> dict[str, float | bool]:
        return {
            "cpu_s": self.cpu_s,
            "helpers_cpu_s": self.helpers_cpu_s,
            "wall_s": self.wall_s,
            "percent_of_a_core": self.percent,
            "engine_inside": self.engine_inside,
        }


class ProcessCpuWindow:
    """Measures :class:`ProcessCpu` from construction to :meth:`end`."""

    def __init__(self) -> None:
        self._cpu0, self._t0 = time.process_time(), time.perf_counter()

    def end(self, engine_inside: bool = False, helpers_cpu_s: float = 0.0) -> ProcessCpu:
        return ProcessCpu(
            time.process_time() - self._cpu0,
            time.perf_counter() - self._t0,
            engine_inside,
            helpers_cpu_s,
        )
