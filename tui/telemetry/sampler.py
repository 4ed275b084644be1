"""The hardware sampler: a background thread that reads a hardware source at a fixed rate.

Each tick produces one :class:`TelemetrySample` (a system reading and a GPU reading,
stamped with ``time.monotonic()``, saying whose hardware it is), keeps it as ``latest``,
pushes the headline numbers into ring buffers (:class:`~tui.core.window.RollingWindow`)
for sparklines and their energy readings into an :class:`EnergyTrack` (J/token afterwards,
tui/telemetry/energy_track.py), and calls ``on_sample`` (the UI posts a message from
there). Default rate 2 Hz (interval 0.5 s). The source is this machine
(:class:`LocalSource`: psutil, RAPL and every vendor's GPUs) unless another is given
(tui/telemetry/sources.py). A failing probe is recorded in the
sample, never raised out of the thread. The source can be switched while sampling
(:meth:`TelemetrySampler.switch_source`); a sample that repeats a lost link's last numbers
(``link`` set) is shown but not added to the history windows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tui.core.energy import EnergyReading
from tui.core.window import RollingWindow
from tui.telemetry.devices.nvml import ABSENT, NvmlProbe, NvmlSample
from tui.telemetry.energy_track import EnergyTrack
from tui.telemetry.gpus import LocalGpus
from tui.telemetry.system import SystemProbe, SystemSample

THIS_MACHINE = "this machine"


@dataclass(frozen=True)
class TelemetrySample:
    t: float  # time.monotonic() when taken
    system: SystemSample | None
    gpu: NvmlSample
    error: str | None = None
    source: str = THIS_MACHINE  # whose hardware: "this machine", "gpu-box via ssh", a URL
    link: str | None = None  # a remote source's link trouble, as the panel should say it

    def energy_readings(self) -> tuple[EnergyReading, ...]:
        """One energy reading per domain: each GPU with an energy counter or a power
        reading, then the CPU's domains (RAPL packages, macmon's CPU power)."""
        out = []
        for g in self.gpu.gpus:
            if g.energy_j is None and g.power_w is None:
                continue
            out.append(
                EnergyReading(
                    domain=f"GPU{g.index} {g.name}",
                    joules=g.energy_j,
                    watts=g.power_w,
                    counter_source=g.energy_source or "energy counter",
                    power_source=g.power_source or "power",
                )
            )
        if self.system is not None:
            out.extend(self.system.energy)
        return tuple(out)


class LocalSource:
    """This machine: psutil for CPU, RAM and the engine's RSS, RAPL for the CPU packages'
    energy, and every vendor's GPUs (tui/telemetry/gpus.py)."""

    label = THIS_MACHINE

    def __init__(
        self,
        gpu: bool = True,
        nvml: NvmlProbe | None = None,
        gpus: LocalGpus | None = None,
        rapl_root: str | None = "/",
    ) -> None:
        """``gpus``/``rapl_root``: the readers (tests: fixture-backed ones)."""
        self._gpu_enabled = gpu
        self._gpus = gpus or LocalGpus(nvml)
        self._rapl_root = rapl_root
        self._system: SystemProbe | None = None
        self._gpu_off = NvmlSample(ABSENT, "GPU sampling off")
        self.start_error: str | None = None

    def start(self) -> None:
        if self._gpu_enabled:
            self._gpu_off = self._gpus.start()
        try:
            self._system = SystemProbe(self._rapl_root)
        except Exception as e:  # psutil unusable on this platform
            self._system = None
            self.start_error = f"psutil: {e}"

    def sample(self, pid: int | None) -> TelemetrySample:
        err = self.start_error
        system = None
        if self._system is not None:
            try:
                system = self._system.sample(pid)
            except Exception as e:
                err = f"psutil: {e}"
        gpu = self._gpu_off
        if self._gpu_enabled:
            gpu, cpu_energy = self._gpus.sample(pid)
            if cpu_energy and system is not None:
                system = replace(system, energy=system.energy + cpu_energy)
        return TelemetrySample(time.monotonic(), system, gpu, err)

    def close(self) -> None:
        self._gpus.close()


class TelemetrySampler:
    """Samples every ``interval_s`` in its own thread; ``pid`` may change at any time."""

    def __init__(
        self,
        interval_s: float = 0.5,
        gpu: bool = True,
        history: int = 120,
        on_sample: Callable[[TelemetrySample], None] | None = None,
        nvml: NvmlProbe | None = None,
        source: Any = None,
    ) -> None:
        """``source``: a HardwareSource (tui/telemetry/sources.py); default this machine
        (``gpu``, ``nvml`` configure that one)."""
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = interval_s
        self.pid: int | None = None
        self.on_sample = on_sample
        self.source = source if source is not None else LocalSource(gpu, nvml)
        self._next_source: Any = None
        self._switch_lock = threading.Lock()
        self._running = False
        self._finished = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.latest: TelemetrySample | None = None
        self.count = 0
        self.cpu = RollingWindow(history)
        self.ram = RollingWindow(history)
        self.rss = RollingWindow(history)
        self.gpu_util = RollingWindow(history)
        self.gpu_mem = RollingWindow(history)
        self.energy = EnergyTrack()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop sampling and wait (up to ``timeout``) for the source to be closed — also
        when the loop runs in a thread this sampler did not start (a UI worker), so that
        a remote link's ssh is ended before the program exits."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        elif self._running:
            self._finished.wait(timeout)

    def switch_source(self, source: Any) -> None:
        """Read ``source`` from now on (the engine changed). Running, the sampler's thread
        closes the old one and starts this one at its next tick; the history windows
        start over (another machine's numbers do not continue this one's)."""
        with self._switch_lock:
            if self._running:
                self._next_source = source
                return
            self.source = source
        self._clear_history()

    def run(self) -> None:
        """The sampling loop (the thread's target; also usable from a thread worker)."""
        with self._switch_lock:
            self._running = True
            self._finished.clear()
        self.source.start()
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                next_t += self.interval_s
                if self._stop.wait(max(0.0, next_t - time.monotonic())):
                    break
                self._take_next_source()
                self._publish(self.sample_once())
                if time.monotonic() > next_t + self.interval_s:
                    next_t = time.monotonic()  # fell behind (suspended): do not burst
        finally:
            with self._switch_lock:
                self._running = False
                pending, self._next_source = self._next_source, None
            try:
                self.source.close()
            except Exception:
                pass
            if pending is not None:
                self.source = pending  # never started: nothing to close; the next run's
            self._finished.set()

    def _take_next_source(self) -> None:
        with self._switch_lock:
            new, self._next_source = self._next_source, None
        if new is None:
            return
        old, self.source = self.source, new
        try:
            old.close()
        except Exception:
            pass  # a source that fails to close must not stop the sampling
        self._clear_history()
        self.source.start()

    def _clear_history(self) -> None:
        for w in (self.cpu, self.ram, self.rss, self.gpu_util, self.gpu_mem):
            w.clear()
        self.energy.clear()

    def sample_once(self) -> TelemetrySample:
        """One reading from the source now (it never raises)."""
        return self.source.sample(self.pid)

    def _publish(self, s: TelemetrySample) -> None:
        self.latest = s
        self.count += 1
        if s.link is None:
            self._push_history(s)
            self.energy.push(s)
        if self.on_sample is not None:
            try:
                self.on_sample(s)
            except Exception:
                pass  # a closed UI must not kill the sampler

    def _push_history(self, s: TelemetrySample) -> None:
        """A fresh reading into the windows (a lost link's repeated numbers are not)."""
        if s.system is not None:
            self.cpu.push(s.system.cpu_percent)
            self.ram.push(s.system.ram_percent)
            if s.system.rss_bytes is not None:
                self.rss.push(s.system.rss_bytes / 2**20)
        if s.gpu.gpus:
            g = s.gpu.gpus[0]
            if g.util_percent is not None:
                self.gpu_util.push(g.util_percent)
            if g.mem_used is not None and g.mem_total:
                self.gpu_mem.push(100.0 * g.mem_used / g.mem_total)
