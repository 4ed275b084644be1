"""Hardware telemetry on this machine: psutil for real, NVML as it is here (absent), NVML
faults by injecting a module whose calls raise (NVML cannot fail on demand for real)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

import tui.telemetry.sampler as sampler_module
from tests.support.virtual_time import VirtualClock
from tui.telemetry.devices.apple import memory_label
from tui.telemetry.devices.nvml import ABSENT, ERROR, OK, NvmlProbe, peak_bandwidth_bps
from tui.telemetry.roofline import roofline
from tui.telemetry.sampler import TelemetrySampler
from tui.telemetry.system import SystemProbe


def test_system_sample_reads_cpu_ram_and_our_rss():
    probe = SystemProbe()
    _ = [i * i for i in range(200_000)]  # some CPU between readings
    s = probe.sample()
    assert 0.0 <= s.cpu_percent <= 100.0
    assert len(s.per_core) == os.cpu_count()
    assert 0 < s.ram_used < s.ram_total
    assert s.rss_pid == os.getpid() and s.rss_bytes and s.rss_bytes > 10 * 2**20
    assert s.ram_label == memory_label()


def test_system_sample_rss_of_another_pid_and_of_a_dead_one():
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; x = bytearray(50 << 20); time.sleep(30)"]
    )
    try:
        time.sleep(1.0)
        probe = SystemProbe()
        s = probe.sample(child.pid)
        assert s.rss_pid == child.pid and s.rss_bytes is not None and s.rss_bytes > 40 * 2**20
    finally:
        child.kill()
        child.wait()
    gone = probe.sample(child.pid)
    assert gone.rss_bytes is None and "gone" in (gone.rss_error or "")


def test_nvml_absent_here_is_a_normal_state():
    """This machine has no NVIDIA driver: NVML must say so, not raise."""
    probe = NvmlProbe()
    first = probe.start()
    if first.status == OK:
        pytest.skip("an NVIDIA GPU is present here")
    assert first.status == ABSENT and first.message.startswith("no NVIDIA GPU")
    assert probe.sample(os.getpid()).status == ABSENT


class FakeNvml:
    """A stand-in NVML with one GPU; ``fail`` makes every per-sample call raise."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.fail = False

    def _check(self) -> None:
        if self.fail:
            raise self.NVMLError("GPU is lost")

    def nvmlInit(self):  # noqa: N802
        pass

    def nvmlShutdown(self):  # noqa: N802
        pass

    def nvmlDeviceGetCount(self):  # noqa: N802
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return "h0"

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return b"Fake H200"

    def nvmlDeviceGetMemoryBusWidth(self, h):  # noqa: N802
        return 5120

    def nvmlDeviceGetMaxClockInfo(self, h, kind):  # noqa: N802
        return 2619

    def nvmlDeviceGetMemoryInfo(self, h):  # noqa: N802
        self._check()
        return SimpleNamespace(used=2 * 2**30, total=141 * 2**30)

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        self._check()
        return SimpleNamespace(gpu=37)

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetTemperature(self, h, s):  # noqa: N802
        return 51

    def nvmlDeviceGetClockInfo(self, h, kind):  # noqa: N802
        return 1980 if kind == 1 else 2619

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        return [SimpleNamespace(pid=os.getpid(), usedGpuMemory=300 * 2**20)]


def test_nvml_fields_peak_bandwidth_and_failure_mid_run():
    fake = FakeNvml()
    probe = NvmlProbe(fake)
    assert probe.start().status == OK
    s = probe.sample(os.getpid())
    g = s.gpus[0]
    assert (g.name, g.util_percent, g.temp_c, g.sm_clock_mhz) == ("Fake H200", 37.0, 51.0, 1980)
    assert g.power_w is None  # not supported: None, not an error
    assert g.proc_mem == 300 * 2**20
    assert g.peak_bandwidth_bps == pytest.approx(3.352e12, rel=1e-3)  # H100/H200-class HBM
    fake.fail = True
    bad = probe.sample(os.getpid())
    assert bad.status == ERROR and "GPU is lost" in bad.message and bad.gpus == []
    fake.fail = False
    assert probe.sample().status == OK  # recovers


def test_peak_bandwidth_formula():
    assert peak_bandwidth_bps(384, 10501) == pytest.approx(1.008e12, rel=1e-3)  # RTX 4090
    assert peak_bandwidth_bps(None, 1000) is None


def test_roofline_share_and_sources():
    r = roofline(94_000_000, 90.0)
    assert r is not None and r.achieved_bps == pytest.approx(8.46e9)
    assert r.share is None and "peak unknown" in r.describe()
    r = roofline(1_000_000_000, 100.0, nvml_peak_bps=1e12)
    assert r.share == pytest.approx(0.1) and "nvml" in r.describe()
    assert roofline(1_000_000_000, 100.0, 1e12, config_peak_gbs=200).peak_source == "config"
    assert roofline(None, 90.0) is None and roofline(10, None) is None


class VirtualTicks:
    """The sampler's stop event on virtual time (tests/support/virtual_time.py): waiting
    ``timeout`` moves the clock by exactly that, then runs ``at_tick(seconds since the
    start)``, which may call :meth:`set` to end the sampling. So the sampler's schedule
    is checked exactly, whatever the machine's load."""

    def __init__(self, clock: VirtualClock, at_tick) -> None:  # type: ignore[no-untyped-def]
        self.clock, self.at_tick = clock, at_tick
        self.t0 = clock.now_s()
        self._set = False

    def set(self) -> None:
        self._set = True

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        if not self._set:
            self.clock.sleep(timeout or 0.0)
            self.at_tick(self.clock.now_s() - self.t0)
        return self._set


def virtual_sampler(monkeypatch, at_tick, **kw) -> tuple[TelemetrySampler, VirtualClock]:  # type: ignore[no-untyped-def]
    clock = VirtualClock()
    monkeypatch.setattr(sampler_module, "time", clock.time)
    sampler = TelemetrySampler(**kw)
    sampler._stop = VirtualTicks(clock, lambda t: at_tick(sampler, t))  # type: ignore[assignment]
    return sampler, clock


def test_sampler_rate_ring_buffers_and_nvml_fault_in_thread(monkeypatch):
    fake = FakeNvml()
    got = []

    def at_tick(sampler: TelemetrySampler, t: float) -> None:
        if t > 0.75:
            fake.fail = True  # the GPU is lost from the 8th tick on
        if t > 1.05:
            sampler._stop.set()  # stop at the 11th wait: 10 ticks taken

    sampler, _ = virtual_sampler(
        monkeypatch, at_tick, interval_s=0.1, nvml=NvmlProbe(fake), on_sample=got.append
    )
    sampler.pid = os.getpid()
    thread = threading.Thread(target=sampler.run)  # as a UI thread worker runs it
    thread.start()
    thread.join(10)  # the ticks stop it (above): nothing here waits for real time
    assert not thread.is_alive()
    assert sampler.count == 10  # 10 Hz for 1 s of the sampler's own clock
    assert [round(b.t - a.t, 6) for a, b in zip(got, got[1:])] == [0.1] * 9
    assert len(got) == sampler.count
    assert len(sampler.cpu.snapshot()) == sampler.count
    assert sampler.gpu_util.snapshot()[0] == 37.0
    assert [s.gpu.status for s in got] == [OK] * 7 + [ERROR] * 3  # shown, it kept going
    assert sampler.latest is got[-1]


def test_a_slow_reading_delays_the_next_tick_instead_of_bursting(monkeypatch):
    """A reading that takes longer than a tick (a hung driver call, a slow remote link):
    the sampler carries on a tick after it, never fires the missed ticks at once."""
    got = []

    def at_tick(sampler: TelemetrySampler, t: float) -> None:
        if t > 1.5:
            sampler._stop.set()

    sampler, clock = virtual_sampler(monkeypatch, at_tick, interval_s=0.1, gpu=False)
    read = sampler.source.sample

    def slow_fourth(pid):  # type: ignore[no-untyped-def]
        s = read(pid)
        if len(got) == 3:
            clock.sleep(0.35)  # the fourth reading takes 0.35 s
        return s

    sampler.source.sample = slow_fourth  # type: ignore[method-assign]
    sampler.on_sample = got.append
    sampler.run()
    gaps = [round(b.t - a.t, 6) for a, b in zip(got, got[1:])]
    assert gaps[:3] == [0.1] * 3 and gaps[3] == pytest.approx(0.45)  # 0.35 s read + a tick
    assert all(g == pytest.approx(0.1) for g in gaps[4:]) and len(gaps) > 6


def test_sampler_default_rate_is_2_hz():
    assert TelemetrySampler().interval_s == 0.5
