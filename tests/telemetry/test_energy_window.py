"""A request's energy window keeps the request's own length (E2E): its two perf_counter
stamps go onto the monotonic clock with one offset, not one read per end."""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace

import pytest

from tui.telemetry import energy_track
from tui.telemetry.devices.nvml import GpuSample, NvmlSample
from tui.telemetry.energy_track import EnergyTrack
from tui.telemetry.sampler import TelemetrySample


def _reading(t: float, watts: float = 300.0) -> TelemetrySample:
    g = GpuSample(0, "Test GPU", energy_j=watts * t, energy_source="test counter")
    return TelemetrySample(t, None, NvmlSample("ok", "1", [g]))


def test_the_window_is_exactly_the_stamps_apart_when_the_thread_is_held_between_clock_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # each read of the offset finds the thread held 5 µs longer between its two clock
    # reads, as under load (the flaky sign: a 1.97 s E2E measured as a window 2 µs longer)
    held = itertools.count()
    clock = SimpleNamespace(monotonic=lambda: 1000.0 + next(held) * 5e-6, perf_counter=lambda: 0.0)
    monkeypatch.setattr(energy_track, "time", clock)
    track = EnergyTrack()
    for t in (999.0, 1000.5, 1001.0, 1003.5):
        track.push(_reading(t))
    t0_ns, t1_ns = 1_000_000_000, 2_970_451_842  # 1.970451842 s apart
    use = track.window_ns(t0_ns, t1_ns, 40)
    assert use is not None
    assert use.window_s == pytest.approx((t1_ns - t0_ns) / 1e9, abs=1e-9)  # within 1 ns
    assert use.domains[0].joules == pytest.approx(300.0 * use.window_s)


def test_the_real_clocks_agree_too() -> None:
    track = EnergyTrack()
    now = time.monotonic()
    for dt in (-2.0, -1.0, 1.0, 2.0):
        track.push(_reading(now + dt))
    t = time.perf_counter_ns()
    use = track.window_ns(t - 500_000_000, t + 500_000_000, 10)
    assert use is not None and use.window_s == pytest.approx(1.0, abs=1e-9)
