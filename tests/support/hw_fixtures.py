"""Hardware fixtures written from each source's documentation (there is no Mac, AMD GPU,
NVIDIA GPU or powercap on the test machines):

- an amdgpu sysfs tree: the kernel's "GPU Power/Thermal Controls and Monitoring" and
  amdgpu "Memory information" files, in their documented units (µW, m°C, Hz, bytes);
- a powercap/RAPL tree: ``intel-rapl:N/{name,energy_uj,max_energy_range_uj}`` and a
  sub-zone that must not be added to its package;
- an ``ioreg -r -d 1 -w 0 -c IOAccelerator -a`` plist with the property names nvtop,
  all-smi and others read (tests/telemetry/fixtures/ioreg-accelerator-m1pro.plist);
- ``macmon pipe`` lines as its README documents them;
- a stand-in amdsmi module with the documented calls and fields.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "telemetry" / "fixtures"
IOREG_M1PRO = FIXTURES / "ioreg-accelerator-m1pro.plist"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def amd_sysfs_tree(
    root: Path,
    busy: str = "37",
    vram_used: str = str(6 * 2**30),
    vram_total: str = str(24 * 2**30),
    power_uw: str | None = "231000000",
    energy_uj: str | None = None,
    product: str | None = "AMD Radeon RX 7900 XTX",
) -> Path:
    """card1 = an AMD GPU (card0 an Intel iGPU, card1-DP-1 a connector); returns root."""
    drm = root / "sys" / "class" / "drm"
    _write(drm / "card0" / "device" / "vendor", "0x8086\n")
    _write(drm / "card0" / "device" / "gpu_busy_percent", "99\n")  # not AMD: never read
    dev = drm / "card1" / "device"
    _write(dev / "vendor", "0x1002\n")
    _write(dev / "device", "0x744c\n")
    _write(dev / "gpu_busy_percent", busy + "\n")
    _write(dev / "mem_info_vram_used", vram_used + "\n")
    _write(dev / "mem_info_vram_total", vram_total + "\n")
    if product is not None:
        _write(dev / "product_name", product + "\n")
    hw = dev / "hwmon" / "hwmon4"
    _write(hw / "name", "amdgpu\n")
    if power_uw is not None:
        _write(hw / "power1_average", power_uw + "\n")
    _write(hw / "temp1_input", "54000\n")
    _write(hw / "freq1_input", "2482000000\n")
    _write(hw / "freq2_input", "1249000000\n")
    if energy_uj is not None:
        _write(hw / "energy1_input", energy_uj + "\n")
    (drm / "card1-DP-1").mkdir(parents=True)
    return root


def rapl_tree(root: Path, energy_uj: int, max_range_uj: int = 262143328850) -> Path:
    """One package zone (and its core sub-zone, and the psys zone); returns root."""
    pc = root / "sys" / "class" / "powercap"
    _write(pc / "intel-rapl" / "enabled", "1\n")  # the control type, not a zone
    _write(pc / "intel-rapl:0" / "name", "package-0\n")
    _write(pc / "intel-rapl:0" / "energy_uj", f"{energy_uj}\n")
    _write(pc / "intel-rapl:0" / "max_energy_range_uj", f"{max_range_uj}\n")
    _write(pc / "intel-rapl:0:0" / "name", "core\n")
    _write(pc / "intel-rapl:0:0" / "energy_uj", "5\n")
    _write(pc / "intel-rapl:1" / "name", "psys\n")
    _write(pc / "intel-rapl:1" / "energy_uj", "99999999\n")
    return root


def set_rapl(root: Path, energy_uj: int) -> None:
    (root / "sys" / "class" / "powercap" / "intel-rapl:0" / "energy_uj").write_text(
        f"{energy_uj}\n"
    )


# `macmon pipe` output, as its README documents one line (values from there)
MACMON_LINE = {
    "timestamp": "2025-02-24T20:38:15.427569+00:00",
    "temp": {"cpu_temp_avg": 43.73614, "gpu_temp_avg": 36.95167},
    "memory": {
        "ram_total": 25769803776,
        "ram_usage": 20985479168,
        "swap_total": 4294967296,
        "swap_usage": 2602434560,
    },
    "ecpu_usage": [1181, 0.082656614],
    "pcpu_usage": [1974, 0.015181795],
    "gpu_usage": [461, 0.021497859],
    "cpu_power": 0.20486385,
    "gpu_power": 0.017451683,
    "ane_power": 0.0,
    "all_power": 0.22231553,
    "sys_power": 5.876533,
    "ram_power": 0.11635789,
    "gpu_ram_power": 0.0009615385,
}


def fake_macmon(tmp: Path, gpu_watts: list[float], extra: tuple[bytes, ...] = ()) -> list[str]:
    """A stand-in ``macmon pipe``: prints ``extra`` raw lines, then one documented JSON
    line per value in ``gpu_watts`` (0.05 s apart), then stays running until killed.
    Returns the command."""
    lines = []
    for w in gpu_watts:
        d = dict(MACMON_LINE)
        d["gpu_power"] = w
        lines.append(json.dumps(d))
    script = tmp / "macmon_stand_in.py"
    script.write_text(
        "import sys, time\n"
        f"for raw in {list(extra)!r}:\n"
        "    sys.stdout.buffer.write(raw); sys.stdout.flush()\n"
        f"for line in {lines!r}:\n"
        "    print(line, flush=True); time.sleep(0.05)\n"
        "time.sleep(60)\n"
    )
    return [sys.executable, str(script)]


def ioreg_runner(
    ioreg: bytes | None, wired_mb: bytes = b"0\n", brand: bytes = b"Apple M1 Pro\n"
) -> Callable[..., bytes | None]:
    """A command runner for AppleGpu answering ioreg and sysctl as a Mac would."""

    calls: list[list[str]] = []

    def run(argv: Any, timeout: float = 2.0) -> bytes | None:
        argv = list(argv)
        calls.append(argv)
        if argv[0] == "ioreg":
            return ioreg
        if argv[:2] == ["sysctl", "-n"] and argv[2] == "iogpu.wired_limit_mb":
            return wired_mb
        if argv[:2] == ["sysctl", "-n"] and argv[2] == "machdep.cpu.brand_string":
            return brand
        return None

    run.calls = calls  # type: ignore[attr-defined]
    return run


class FakeAmdSmi:
    """amdsmi's documented Python calls for one MI300X-like GPU (ROCm 6.2+ field names;
    ``old_energy_key`` uses the pre-6.2.1 ``power`` key of amdsmi_get_energy_count)."""

    AmdSmiTemperatureType = SimpleNamespace(EDGE=0, HOTSPOT=1, JUNCTION=1)
    AmdSmiTemperatureMetric = SimpleNamespace(CURRENT=0)
    AmdSmiClkType = SimpleNamespace(GFX=0, MEM=1)

    class AmdSmiLibraryException(Exception):
        pass

    def __init__(self, accumulator: int = 1_000_000, old_energy_key: bool = False) -> None:
        self.accumulator = accumulator
        self.old_energy_key = old_energy_key
        self.shut = False

    def amdsmi_init(self) -> None:
        pass

    def amdsmi_shut_down(self) -> None:
        self.shut = True

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["h0"]

    def amdsmi_get_gpu_asic_info(self, h: str) -> dict[str, Any]:
        return {"market_name": "AMD Instinct MI300X", "vendor_id": "0x1002"}

    def amdsmi_get_gpu_activity(self, h: str) -> dict[str, Any]:
        return {"gfx_activity": 88, "umc_activity": 40, "mm_activity": "N/A"}

    def amdsmi_get_gpu_vram_usage(self, h: str) -> dict[str, Any]:
        return {"vram_total": 196592, "vram_used": 51200}  # MB

    def amdsmi_get_power_info(self, h: str) -> dict[str, Any]:
        return {"current_socket_power": 612, "average_socket_power": "N/A"}

    def amdsmi_get_temp_metric(self, h: str, kind: int, metric: int) -> int:
        if kind == 0:  # MI300X reports no edge sensor
            raise self.AmdSmiLibraryException("AMDSMI_STATUS_NOT_SUPPORTED")
        return 71

    def amdsmi_get_clock_info(self, h: str, kind: int) -> dict[str, Any]:
        return {"clk": 2100 if kind == 0 else 1300, "min_clk": 500, "max_clk": 2100}

    def amdsmi_get_energy_count(self, h: str) -> dict[str, Any]:
        key = "power" if self.old_energy_key else "energy_accumulator"
        return {key: self.accumulator, "counter_resolution": 15.3, "timestamp": 1}


class EnergyNvml:
    """pynvml's calls for one GPU (as in NVML's API reference) with the total-energy
    counter (``nvmlDeviceGetTotalEnergyConsumption``: mJ since the driver loaded) and
    power in mW; ``mj`` and ``mw`` are set by the test."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def __init__(self, mj: int = 5_000_000, mw: int = 250_000, energy: bool = True) -> None:
        self.mj, self.mw, self.energy = mj, mw, energy

    def nvmlInit(self) -> None:  # noqa: N802
        pass

    def nvmlShutdown(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:  # noqa: N802
        return "h0"

    def nvmlDeviceGetName(self, h: str) -> bytes:  # noqa: N802
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h: str) -> str:  # noqa: N802
        return "GPU-0"

    def nvmlDeviceGetMemoryBusWidth(self, h: str) -> int:  # noqa: N802
        return 5120

    def nvmlDeviceGetMaxClockInfo(self, h: str, kind: int) -> int:  # noqa: N802
        return 2619

    def nvmlDeviceGetMemoryInfo(self, h: str) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(used=9 * 2**30, total=141 * 2**30)

    def nvmlDeviceGetUtilizationRates(self, h: str) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(gpu=97)

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:  # noqa: N802
        return self.mw

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:  # noqa: N802
        return 55

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int:  # noqa: N802
        return 1980 if kind == 1 else 2619

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[Any]:  # noqa: N802
        return []

    def nvmlDeviceGetTotalEnergyConsumption(self, h: str) -> int:  # noqa: N802
        if not self.energy:  # before Volta: NVML_ERROR_NOT_SUPPORTED
            raise self.NVMLError("Not Supported")
        return self.mj
