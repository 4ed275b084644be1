"""NVIDIA GPUs via NVML (the ``pynvml`` module from nvidia-ml-py).

No NVML library, no driver or no GPU is a normal state (``status == "absent"``, shown as
"no NVIDIA GPU"). NVML raising after it worked is ``status == "error"`` with the message:
shown, never raised. Fields a device does not support are None.

Definitions: ``util_percent`` = NVML GPU utilisation (share of the last sample period a
kernel ran); ``mem_used``/``mem_total`` bytes; ``power_w`` watts; ``temp_c`` °C;
``sm_clock_mhz``/``mem_clock_mhz`` current clocks; ``proc_mem`` the GPU memory NVML lists
for the watched PID (None when it has none there); ``processes`` every process holding
GPU memory (remote samples; pids are the remote host's); ``peak_bandwidth_bps`` =
memory bus width (bits) / 8 × max memory clock (Hz) × 2 (double data rate);
``energy_j`` NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``: mJ
since the driver was loaded, Volta and later; None where not supported), in joules.

:class:`GpuSample` is every vendor's GPU row (NVIDIA here; AMD: tui/telemetry/devices/amd_gpu.py,
Apple: tui/telemetry/devices/apple_gpu.py, through the agent's device dicts): ``vendor`` says
whose; ``unified_memory`` means the memory is system RAM (Apple Silicon: ``mem_used`` is
the RAM the GPU has in use and ``mem_total`` the GPU's working-set budget, never VRAM).
:class:`NvmlSample` (the name is historical) holds the GPUs of one reading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

# What NVML (or any GPU reader) found: a GPU read, none here (a normal state), or a
# reader that failed after it worked.
GpuStatus = Literal["ok", "absent", "error"]
ABSENT: GpuStatus = "absent"
OK: GpuStatus = "ok"
ERROR: GpuStatus = "error"
ENERGY_SOURCE = "NVML total-energy counter"
BANDWIDTH_SOURCE = "NVML bus width × max memory clock"


@dataclass(frozen=True)
class GpuProcess:
    """A process holding GPU memory (remote hosts: their pids, as that host lists them)."""

    pid: int
    name: str | None
    bytes: int | None


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str
    util_percent: float | None = None
    mem_used: int | None = None
    mem_total: int | None = None
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    proc_mem: int | None = None
    peak_bandwidth_bps: float | None = None
    processes: tuple[GpuProcess, ...] = ()  # filled by the remote agent (every process)
    vendor: str = "nvidia"  # nvidia | amd | apple
    unified_memory: bool = False  # memory is system RAM (Apple Silicon)
    energy_j: float | None = None  # a cumulative energy counter, joules
    energy_source: str | None = None  # "NVML total-energy counter", ...
    power_source: str | None = None  # "NVML power", "amdgpu hwmon power1_average", ...
    gpu_cores: int | None = None  # Apple: the GPU's core count (picks the chip's bandwidth)
    mem_total_source: str | None = None  # Apple: where the working-set budget came from
    peak_bandwidth_source: str | None = None  # "NVML bus width × clock", "Apple chip table"
    note: str | None = None  # what the reader could not get ("power: needs macmon ...")


@dataclass(frozen=True)
class NvmlSample:
    status: GpuStatus
    message: str = ""
    gpus: list[GpuSample] = field(default_factory=list)


def peak_bandwidth_bps(bus_width_bits: int | None, max_mem_clock_mhz: int | None) -> float | None:
    """Peak memory bandwidth in bytes/s from NVML's bus width and max memory clock."""
    if not bus_width_bits or not max_mem_clock_mhz:
        return None
    return bus_width_bits / 8.0 * max_mem_clock_mhz * 1e6 * 2.0


class NvmlProbe:
    """Opens NVML once; ``sample()`` never raises."""

    def __init__(self, nvml: Any | None = None) -> None:
        self._nvml = nvml  # injectable for fault tests; default: import pynvml
        self._handles: list[Any] = []
        self._static: list[tuple[str, float | None]] = []
        self.status = ABSENT
        self.message = "not started"

    def start(self) -> NvmlSample:
        """Initialise NVML. Absent library/driver/GPU gives status 'absent'."""
        try:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            nv = self._nvml
            nv.nvmlInit()
            count = nv.nvmlDeviceGetCount()
        except ImportError:
            return self._set(ABSENT, "no NVIDIA GPU (nvidia-ml-py not installed)")
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return self._set(ABSENT, f"no NVIDIA GPU ({_nvml_text(e)})")
        if count == 0:
            return self._set(ABSENT, "no NVIDIA GPU (NVML sees 0 devices)")
        self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        for h in self._handles:
            name = self._get(nv.nvmlDeviceGetName, h) or "NVIDIA GPU"
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            bus = self._get(nv.nvmlDeviceGetMemoryBusWidth, h)
            mclk = self._get(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM)
            self._static.append((str(name), peak_bandwidth_bps(bus, mclk)))
        return self._set(OK, f"{count} NVIDIA GPU(s)")

    def _set(self, status: GpuStatus, message: str) -> NvmlSample:
        self.status, self.message = status, message
        return NvmlSample(status, message)

    def sample(self, pid: int | None = None) -> NvmlSample:
        if self.status == ABSENT or self._nvml is None:
            return NvmlSample(ABSENT, self.message)
        nv = self._nvml
        gpus: list[GpuSample] = []
        try:
            for i, h in enumerate(self._handles):
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                util = self._get(nv.nvmlDeviceGetUtilizationRates, h)
                power = self._get(nv.nvmlDeviceGetPowerUsage, h)
                temp = self._get(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
                energy = self._energy_mj(h)
                gpus.append(
                    GpuSample(
                        index=i,
                        name=self._static[i][0],
                        util_percent=None if util is None else float(util.gpu),
                        mem_used=int(mem.used),
                        mem_total=int(mem.total),
                        power_w=None if power is None else power / 1000.0,
                        temp_c=None if temp is None else float(temp),
                        sm_clock_mhz=self._get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                        mem_clock_mhz=self._get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                        proc_mem=self._proc_mem(h, pid),
                        peak_bandwidth_bps=self._static[i][1],
                        energy_j=None if energy is None else energy / 1000.0,
                        energy_source=None if energy is None else ENERGY_SOURCE,
                        power_source=None if power is None else "NVML power",
                        peak_bandwidth_source=BANDWIDTH_SOURCE if self._static[i][1] else None,
                    )
                )
        except Exception as e:
            self.status, self.message = ERROR, f"NVML error: {_nvml_text(e)}"
            return NvmlSample(ERROR, self.message)
        self.status, self.message = OK, f"{len(gpus)} NVIDIA GPU(s)"
        return NvmlSample(OK, self.message, gpus)

    def _energy_mj(self, handle: Any) -> int | None:
        """NVML's total-energy counter (mJ), None where the GPU or binding has none."""
        fn = getattr(self._nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
        if fn is None:
            return None
        value = self._get(fn, handle)
        return int(value) if isinstance(value, int) and value >= 0 else None

    def _proc_mem(self, handle: Any, pid: int | None) -> int | None:
        if pid is None:
            return None
        nv = self._nvml
        if nv is None:
            return None
        procs = self._get(nv.nvmlDeviceGetComputeRunningProcesses, handle) or []
        for p in procs:
            if getattr(p, "pid", None) == pid:
                used = getattr(p, "usedGpuMemory", None)
                return int(used) if isinstance(used, int) else None
        return None

    def _get(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A field the device may not support: None on NotSupported-style errors."""
        try:
            return fn(*args)
        except Exception as e:
            if "Not Supported" in _nvml_text(e) or "NotSupported" in type(e).__name__:
                return None
            raise

    def close(self) -> None:
        if self.status != ABSENT and self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
        self.status, self.message = ABSENT, "closed"


def _nvml_text(e: BaseException) -> str:
    text = str(e).strip()
    return text or type(e).__name__
