"""Hardware telemetry on this machine: psutil for real, NVML as it is here (absent), NVML
faults by injecting a module whose calls raise (NVML cannot fail on demand for real)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from tui.telemetry.apple import memory_label
from tui.telemetry.nvml import ABSENT, ERROR, OK, NvmlProbe, peak_bandwidth_bps
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


def test_sampler_rate_ring_buffers_and_nvml_fault_in_thread():
    fake = FakeNvml()
    got = []
    sampler = TelemetrySampler(interval_s=0.1, nvml=NvmlProbe(fake), on_sample=got.append)
    sampler.pid = os.getpid()
    sampler.start()
    try:
        time.sleep(0.75)
        fake.fail = True
        time.sleep(0.35)
    finally:
        sampler.stop()
    assert 7 <= sampler.count <= 12, sampler.count  # 10 Hz for ~1.1 s
    assert len(got) == sampler.count
    assert len(sampler.cpu.snapshot()) == sampler.count
    assert sampler.gpu_util.snapshot()[0] == 37.0
    assert got[-1].gpu.status == ERROR  # shown, the thread kept going
    assert sampler.latest is got[-1]


def test_sampler_default_rate_is_2_hz():
    assert TelemetrySampler().interval_s == 0.5
