"""Hardware sources behind fleet rows: GPUs for endpoints Prometheus has no DCGM series for.

An endpoint's source is its engine's ``telemetry`` in config, else the fleet-wide
``--telemetry SOURCE`` (the hardware behind the endpoints given with ``--url`` or in
config: use it when they run on one box, e.g. through a tunnel). Rows Prometheus found on
its own take GPUs from its DCGM series only. A named source wins over the DCGM join: the
user said where the endpoint runs.

Each distinct source is opened once and read without blocking (an SSH link or exporter
runs in its own thread, :mod:`tui.telemetry.remote.remote_link`); a lost link leaves its last
good GPUs on the row and says so in ``hardware_error``. The GPU numbers are the source's
own (:class:`~tui.telemetry.devices.nvml.GpuSample`), converted to the row's units (MiB).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tui.fleet.rows import EndpointRow, GpuRow
from tui.telemetry.devices.nvml import GpuSample
from tui.telemetry.sampler import TelemetrySample
from tui.telemetry.sources import HardwareSource, open_source, parse_source, settled

MIB = 1024 * 1024

Opener = Callable[[str, float], HardwareSource]


def _open(name: str, interval_s: float) -> HardwareSource:
    return open_source(parse_source(name), interval_s)


def gpu_row(host: str, g: GpuSample) -> GpuRow:
    """A source's GPU as a fleet GPU row (bytes to MiB; free = total − used, so the
    row's total is the source's)."""
    used = g.mem_used / MIB if g.mem_used is not None else None
    free = (
        (g.mem_total - g.mem_used) / MIB
        if g.mem_total is not None and g.mem_used is not None
        else None
    )
    return GpuRow(
        host=host,
        gpu=str(g.index),
        model=g.name or None,
        util_pct=g.util_percent,
        mem_used_mib=used,
        mem_free_mib=free,
        power_w=g.power_w,
        temp_c=g.temp_c,
        sm_clock_mhz=g.sm_clock_mhz,
        mem_clock_mhz=g.mem_clock_mhz,
    )


def apply_sample(row: EndpointRow, sample: TelemetrySample) -> None:
    """Put what ``sample`` says about the host onto ``row``."""
    row.hardware = sample.source
    trouble = sample.link or sample.error
    if sample.gpu.status == "ok":
        row.gpus = [gpu_row(sample.source, g) for g in sample.gpu.gpus]
    elif sample.gpu.status == "absent" and sample.system is not None:
        row.gpus = []  # the host answered: it has no GPU the source can read
    elif not trouble and sample.gpu.message:
        trouble = f"GPU: {sample.gpu.message}"
    row.hardware_error = trouble
    if sample.system is not None:
        row.host_cpu_pct = sample.system.cpu_percent
        if sample.system.ram_total:
            row.host_mem_pct = 100.0 * sample.system.ram_used / sample.system.ram_total


class FleetHardware:
    """The open sources, one per distinct name; :meth:`fill` never blocks on a link."""

    def __init__(self, default: str | None, interval_s: float, opener: Opener = _open) -> None:
        self.default = default
        self.interval_s = interval_s
        self._opener = opener
        self._sources: dict[str, HardwareSource] = {}
        self._lock = threading.Lock()

    def source_name(self, configured: str | None) -> str | None:
        return configured or self.default

    def _source(self, name: str) -> HardwareSource:
        with self._lock:
            src = self._sources.get(name)
            if src is None:
                src = self._opener(name, self.interval_s)
                src.start()
                self._sources[name] = src
            return src

    def fill(self, row: EndpointRow, name: str) -> None:
        """The latest reading of source ``name`` onto ``row``."""
        apply_sample(row, self._source(name).sample(None))

    def wait_ready(self, names: list[str], timeout_s: float) -> None:
        """Wait until each named source has a reading or has lost its link (``--once``:
        an SSH link takes a second or so to connect), at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        pending = [self._source(n) for n in dict.fromkeys(names)]
        while pending and time.monotonic() < deadline:
            pending = [s for s in pending if not settled(s.sample(None))]
            if pending:
                time.sleep(0.05)

    def close(self) -> None:
        with self._lock:
            sources, self._sources = list(self._sources.values()), {}
        for src in sources:
            src.close()
