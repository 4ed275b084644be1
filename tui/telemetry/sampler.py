"""The hardware sampler: a background thread that reads psutil and NVML at a fixed rate.

Each tick produces one :class:`TelemetrySample` (a system reading and an NVML reading,
stamped with ``time.monotonic()``), keeps it as ``latest``, pushes the headline numbers
into ring buffers (:class:`~tui.core.window.RollingWindow`) for sparklines, and calls
``on_sample`` (the UI posts a message from there). Default rate 2 Hz (interval 0.5 s).
A failing probe is recorded in the sample, never raised out of the thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tui.core.window import RollingWindow
from tui.telemetry.nvml import ABSENT, NvmlProbe, NvmlSample
from tui.telemetry.system import SystemProbe, SystemSample


@dataclass(frozen=True)
class TelemetrySample:
    t: float  # time.monotonic() when taken
    system: SystemSample | None
    gpu: NvmlSample
    error: str | None = None


class TelemetrySampler:
    """Samples every ``interval_s`` in its own thread; ``pid`` may change at any time."""

    def __init__(
        self,
        interval_s: float = 0.5,
        gpu: bool = True,
        history: int = 120,
        on_sample: Callable[[TelemetrySample], None] | None = None,
        nvml: NvmlProbe | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = interval_s
        self.pid: int | None = None
        self.on_sample = on_sample
        self._gpu_enabled = gpu
        self._nvml = nvml or NvmlProbe()
        self._system: SystemProbe | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.latest: TelemetrySample | None = None
        self.count = 0
        self.cpu = RollingWindow(history)
        self.ram = RollingWindow(history)
        self.rss = RollingWindow(history)
        self.gpu_util = RollingWindow(history)
        self.gpu_mem = RollingWindow(history)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def run(self) -> None:
        """The sampling loop (the thread's target; also usable from a thread worker)."""
        gpu_start = (
            self._nvml.start() if self._gpu_enabled else NvmlSample(ABSENT, "GPU sampling off")
        )
        try:
            self._system = SystemProbe()
        except Exception as e:  # psutil unusable on this platform
            self._system = None
            self._publish(TelemetrySample(time.monotonic(), None, gpu_start, f"psutil: {e}"))
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                next_t += self.interval_s
                if self._stop.wait(max(0.0, next_t - time.monotonic())):
                    break
                self._publish(self.sample_once(gpu_start))
                if time.monotonic() > next_t + self.interval_s:
                    next_t = time.monotonic()  # fell behind (suspended): do not burst
        finally:
            self._nvml.close()

    def sample_once(self, gpu_off: NvmlSample | None = None) -> TelemetrySample:
        err = None
        system = None
        if self._system is not None:
            try:
                system = self._system.sample(self.pid)
            except Exception as e:
                err = f"psutil: {e}"
        if self._gpu_enabled:
            gpu = self._nvml.sample(self.pid)
        else:
            gpu = gpu_off or NvmlSample(ABSENT, "GPU sampling off")
        return TelemetrySample(time.monotonic(), system, gpu, err)

    def _publish(self, s: TelemetrySample) -> None:
        self.latest = s
        self.count += 1
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
        if self.on_sample is not None:
            try:
                self.on_sample(s)
            except Exception:
                pass  # a closed UI must not kill the sampler
