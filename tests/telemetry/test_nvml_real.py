"""The real NVML success path: on a machine with an NVIDIA GPU, every reader of NVML
(the hardware panel's probe, the remote agent, a bench report's environment) lists the
GPUs the driver lists, with the driver's own numbers.

Where there is no NVIDIA GPU these skip and say so: the stand-in NVML tests
(tests/telemetry/test_hardware.py, test_agent.py) run everywhere and cover the
arithmetic and the faults; these are the only tests that read a real driver.
"""

from __future__ import annotations

import os

import pytest

from tui.bench.run import environment
from tui.telemetry.devices.agent import Agent
from tui.telemetry.devices.nvml import OK, NvmlProbe


@pytest.fixture
def probe():  # type: ignore[no-untyped-def]
    p = NvmlProbe()
    first = p.start()
    if first.status != OK:
        pytest.skip(f"no NVIDIA GPU here, real NVML not tested on this machine: {first.message}")
    yield p
    p.close()


def _driver_view() -> list[tuple[str, int]]:
    """(name, memory total) per GPU, asked of pynvml directly."""
    import pynvml

    pynvml.nvmlInit()
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else str(name)
            out.append((name, int(pynvml.nvmlDeviceGetMemoryInfo(h).total)))
        return out
    finally:
        pynvml.nvmlShutdown()


def test_the_probe_reads_every_gpu_the_driver_lists(probe) -> None:  # type: ignore[no-untyped-def]
    s = probe.sample(os.getpid())
    assert s.status == OK and s.message == f"{len(s.gpus)} NVIDIA GPU(s)"
    assert [(g.name, g.mem_total) for g in s.gpus] == _driver_view()
    for g in s.gpus:
        assert g.vendor == "nvidia" and not g.unified_memory
        assert g.mem_total is not None and g.mem_used is not None
        assert 0 < g.mem_total and 0 <= g.mem_used <= g.mem_total
        assert g.util_percent is None or 0 <= g.util_percent <= 100
        assert g.temp_c is None or 0 < g.temp_c < 130
        assert g.power_w is None or 0 < g.power_w < 5000
        assert g.peak_bandwidth_bps is None or g.peak_bandwidth_bps > 1e10  # > 10 GB/s
        assert g.energy_j is None or g.energy_j >= 0
    again = probe.sample(os.getpid())  # a second reading works too (handles are kept)
    assert again.status == OK and len(again.gpus) == len(s.gpus)


def test_the_agent_and_a_bench_report_list_the_same_gpus(probe) -> None:  # type: ignore[no-untyped-def]
    want = _driver_view()
    gpu = Agent(0.2).sample()["gpu"]
    assert gpu["status"] == OK
    nvidia = [d for d in gpu["devices"] if d["vendor"] == "nvidia"]
    assert [(d["name"], d["mem_total"]) for d in nvidia] == want
    listed = [g for g in environment.gpus() if g.get("vendor") in (None, "nvidia")]
    assert [(g["name"], g["memory_total_bytes"]) for g in listed] == want
