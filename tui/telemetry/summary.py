"""What the hardware did during one request: ``infertop run --telemetry SOURCE``.

:class:`HardwareWindow` collects the fresh samples a source gives while a request runs
(a lost link's repeated numbers are not fresh and are left out) and the one after it ends
(NVML's utilisation covers the period before the reading). :func:`summarize` reduces
them: per GPU the peak and mean utilisation, the peak memory used, the peak power and
temperature; CPU mean and peak; RAM peak. A field the source does not report (DCGM has
no CPU, node_exporter no GPU) is None — null in JSON, never a guessed number. The window
also keeps the last fresh sample before the request, so that :meth:`HardwareWindow.energy`
has readings on both sides of it (J/token: tui/core/energy.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from tui.telemetry.devices.nvml import GpuStatus
from tui.telemetry.sampler import TelemetrySample
from tui.telemetry.sources import settled


@dataclass
class GpuSummary:
    index: int
    name: str
    util_percent_peak: float | None = None
    util_percent_mean: float | None = None
    mem_used_peak_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w_peak: float | None = None
    temp_c_peak: float | None = None


@dataclass
class HardwareSummary:
    source: str
    samples: int
    link: str | None = None  # the link's trouble when it had some
    cpu_percent_mean: float | None = None
    cpu_percent_peak: float | None = None
    ram_used_peak_bytes: int | None = None
    ram_total_bytes: int | None = None
    ram_label: str | None = None
    gpu_status: GpuStatus | None = None
    gpu_message: str | None = None
    gpus: list[GpuSummary] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class HardwareWindow:
    """Collects samples (``add`` is the sampler's ``on_sample``) between ``begin()`` and
    ``end()``; ``wait_after_end`` waits for the first sample taken after the end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._start: float | None = None
        self._end: float | None = None
        self.samples: list[TelemetrySample] = []
        self.before: TelemetrySample | None = None  # the last fresh one before begin()
        self.last: TelemetrySample | None = None
        self._after = False
        self._ready = False

    def begin(self) -> None:
        with self._lock:
            self._start = time.monotonic()

    def end(self) -> None:
        with self._lock:
            self._end = time.monotonic()

    def wait_ready(self, timeout: float) -> None:
        """Wait until the source has given a reading, or said its link is lost (an SSH
        link connects while the engine loads; this covers what is left of that)."""
        with self._cond:
            self._cond.wait_for(lambda: self._ready, timeout)

    def add(self, s: TelemetrySample) -> None:
        with self._cond:
            self.last = s
            if not self._ready and settled(s):
                self._ready = True
                self._cond.notify_all()
            if s.link is not None:
                return
            if self._start is None or s.t < self._start:
                self.before = s
                return
            if self._after:
                return
            self.samples.append(s)
            if self._end is not None and s.t >= self._end:
                self._after = True
                self._cond.notify_all()

    def wait_after_end(self, timeout: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._after, timeout)

    def energy(self, t0_ns: int | None, t1_ns: int | None, output_tokens: int | None) -> Any:
        """The energy (:class:`~tui.core.energy.EnergyUse`) of [t0_ns, t1_ns]
        (``perf_counter_ns`` stamps: the request's sent and end), from the readings kept;
        None when the window is not known or no reading had energy or power."""
        if t0_ns is None or t1_ns is None:
            return None
        from tui.telemetry.energy_track import EnergyTrack

        track = EnergyTrack()
        with self._lock:
            kept = ([self.before] if self.before is not None else []) + list(self.samples)
        for s in kept:
            track.push(s)
        return track.window_ns(t0_ns, t1_ns, output_tokens)


def summarize(
    source: str, samples: list[TelemetrySample], last: TelemetrySample | None
) -> HardwareSummary:
    """The summary of ``samples`` (fresh readings); ``last``: the latest sample seen, for
    its link trouble and GPU status when no fresh reading came."""
    out = HardwareSummary(source=source, samples=len(samples))
    if last is not None:
        out.link = last.link
        out.source = last.source
    systems = [s.system for s in samples if s.system is not None]
    if systems:
        cpu = [x.cpu_percent for x in systems]
        out.cpu_percent_mean = sum(cpu) / len(cpu)
        out.cpu_percent_peak = max(cpu)
        out.ram_used_peak_bytes = max(x.ram_used for x in systems)
        out.ram_total_bytes = systems[-1].ram_total or None
        out.ram_label = systems[-1].ram_label
    ref = samples[-1] if samples else last
    if ref is not None:
        out.gpu_status, out.gpu_message = ref.gpu.status, ref.gpu.message
    by_index: dict[int, list[Any]] = {}
    for s in samples:
        for g in s.gpu.gpus:
            by_index.setdefault(g.index, []).append(g)
    for index in sorted(by_index):
        gs = by_index[index]
        util = [g.util_percent for g in gs if g.util_percent is not None]
        out.gpus.append(
            GpuSummary(
                index=index,
                name=gs[-1].name,
                util_percent_peak=max(util) if util else None,
                util_percent_mean=sum(util) / len(util) if util else None,
                mem_used_peak_bytes=_max(g.mem_used for g in gs),
                mem_total_bytes=gs[-1].mem_total,
                power_w_peak=_max(g.power_w for g in gs),
                temp_c_peak=_max(g.temp_c for g in gs),
            )
        )
    return out


def _max(values: Any) -> Any:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _gib(n: int | None) -> str:
    return "–" if n is None else f"{n / 2**30:.1f}"


def format_line(h: HardwareSummary) -> str:
    """One line after ``infertop run``'s metrics."""
    head = f"hardware ({h.source}, {h.samples} sample{'s' if h.samples != 1 else ''})"
    if h.samples == 0:
        why = f" ({h.link})" if h.link else ""
        return f"{head}: no sample during the request{why}"
    parts = []
    for g in h.gpus:
        text = f"GPU{g.index} {g.name}"
        if g.util_percent_peak is not None and g.util_percent_mean is not None:
            text += f" util peak {g.util_percent_peak:.0f}% mean {g.util_percent_mean:.0f}%"
        text += f", mem {_gib(g.mem_used_peak_bytes)}/{_gib(g.mem_total_bytes)} GiB"
        if g.power_w_peak is not None:
            text += f", power peak {g.power_w_peak:.0f} W"
        parts.append(text)
    if not h.gpus and h.gpu_message:
        parts.append(h.gpu_message)
    if h.cpu_percent_mean is not None and h.cpu_percent_peak is not None:
        parts.append(f"CPU mean {h.cpu_percent_mean:.0f}% peak {h.cpu_percent_peak:.0f}%")
    if h.ram_used_peak_bytes is not None:
        label = h.ram_label or "RAM"
        parts.append(f"{label} {_gib(h.ram_used_peak_bytes)}/{_gib(h.ram_total_bytes)} GiB")
    line = f"{head}: " + "; ".join(parts)
    if h.link:
        line += f" [{h.link}]"
    return line
