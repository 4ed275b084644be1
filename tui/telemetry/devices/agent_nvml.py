"""NVIDIA GPUs for the agent: NVML, opened once (the agent's own reader: the bundle fed to
a remote ``python3`` cannot import tui/telemetry/devices/nvml.py, which is typed for this side).

Stdlib only, Python 3.6 syntax, no annotations (types are PEP 484 type comments): bundled
into the agent fed to a remote ``python3`` (tui/telemetry/devices/agent.py); every top-level name
is unique across the bundle.
The device dict's fields are documented in tui/telemetry/devices/agent.py.
"""

import sys

if "_INFERTOP_AGENT_BUNDLE" not in globals():  # installed; the bundle defines it above
    from tui.telemetry.devices.host_stats import is_apple_silicon

if False:  # typing only (never runs): names for the type comments, read by mypy alone
    from collections.abc import Callable  # noqa: F401
    from typing import Any  # noqa: F401

NVML_ENERGY_SOURCE = "NVML total-energy counter"
NVML_ON_APPLE = "no NVIDIA GPU (Apple Silicon)"


def nvml_import():  # type: () -> Any
    """pynvml, or None where it is not importable (or broken: anything raised)."""
    try:
        import pynvml

        return pynvml
    except Exception:
        return None


def nvml_text(e):  # type: (BaseException) -> str
    text = str(e).strip()
    return text or type(e).__name__


def nvml_str(value):  # type: (object) -> str
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Gpus:
    """NVML, opened once. ``read()`` never raises."""

    def __init__(self, enabled=True, nvml=None):  # type: (bool, Any) -> None
        self.nv = None  # type: Any
        self.handles = []  # type: list[Any]
        self.static = []  # type: list[dict[str, Any]]
        self.status = "absent"
        self.unified = False
        self._names = {}  # type: dict[int, str | None]
        if not enabled:
            self.message = "GPU sampling off"
            return
        if is_apple_silicon():
            self.unified = True
            self.message = NVML_ON_APPLE
            return
        nv = nvml if nvml is not None else nvml_import()
        if nv is None:
            self.message = "no NVIDIA GPU (nvidia-ml-py not installed)"
            return
        try:
            nv.nvmlInit()
            count = nv.nvmlDeviceGetCount()
        except Exception as e:  # library, driver or device missing
            self.message = f"no NVIDIA GPU ({nvml_text(e)})"
            return
        if count == 0:
            self.message = "no NVIDIA GPU (NVML sees 0 devices)"
            self._shutdown(nv)
            return
        try:
            for i in range(count):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                self.handles.append(h)
                self.static.append(
                    {
                        "name": nvml_str(self._get(nv.nvmlDeviceGetName, h) or "NVIDIA GPU"),
                        "uuid": nvml_str(self._get(nv.nvmlDeviceGetUUID, h) or "") or None,
                        "bus_width_bits": self._get(nv.nvmlDeviceGetMemoryBusWidth, h),
                        "max_mem_clock_mhz": self._get(
                            nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM
                        ),
                    }
                )
        except Exception as e:
            self.status, self.message = "error", "NVML error: " + nvml_text(e)
            self.nv = nv
            return
        self.nv = nv
        self.status, self.message = "ok", f"{count} NVIDIA GPU(s)"

    @staticmethod
    def _get(fn, *args):  # type: (Callable[..., Any], *Any) -> Any
        """A field the device may not support: None on NotSupported-style errors."""
        try:
            return fn(*args)
        except Exception as e:
            if "Not Supported" in nvml_text(e) or "NotSupported" in type(e).__name__:
                return None
            raise

    def read(self):  # type: () -> dict[str, Any]
        out = {
            "status": self.status,
            "message": self.message,
            "unified_memory": self.unified,
            "devices": [],
        }
        nv = self.nv
        if nv is None or not self.handles:
            return out
        devices = []  # type: list[dict[str, Any]]
        try:
            for i, h in enumerate(self.handles):
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                util = self._get(nv.nvmlDeviceGetUtilizationRates, h)
                power = self._get(nv.nvmlDeviceGetPowerUsage, h)
                temp = self._get(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
                energy_fn = getattr(nv, "nvmlDeviceGetTotalEnergyConsumption", None)
                energy = self._get(energy_fn, h) if energy_fn is not None else None
                energy = energy if isinstance(energy, int) and energy >= 0 else None
                device = {"index": i, "vendor": "nvidia", "unified_memory": False}
                device.update(self.static[i])
                device.update(
                    {
                        "util_percent": None if util is None else float(util.gpu),
                        "mem_used": int(mem.used),
                        "mem_total": int(mem.total),
                        "power_w": None if power is None else power / 1000.0,
                        "power_source": None if power is None else "NVML power",
                        "energy_j": None if energy is None else energy / 1000.0,
                        "energy_source": None if energy is None else NVML_ENERGY_SOURCE,
                        "temp_c": None if temp is None else float(temp),
                        "sm_clock_mhz": self._get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                        "mem_clock_mhz": self._get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                        "processes": self._processes(h),
                    }
                )
                devices.append(device)
        except Exception as e:
            out["status"] = "error"
            out["message"] = "NVML error: " + nvml_text(e)
            return out
        out["status"] = "ok"
        out["message"] = f"{len(devices)} NVIDIA GPU(s)"
        out["devices"] = devices
        return out

    def _processes(self, handle):  # type: (Any) -> list[dict[str, Any]]
        nv = self.nv
        found = {}  # type: dict[int, int | None]
        for fn_name in (
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ):
            fn = getattr(nv, fn_name, None)
            if fn is None:
                continue
            try:
                procs = fn(handle) or []
            except Exception:
                continue
            for p in procs:
                pid = getattr(p, "pid", None)
                if not isinstance(pid, int):
                    continue
                used = getattr(p, "usedGpuMemory", None)
                used = int(used) if isinstance(used, int) else None
                known = found.get(pid)  # None: not listed yet, or listed with no bytes
                if known is not None and used is not None:
                    used = max(used, known)
                elif pid in found and used is None:
                    used = found[pid]
                found[pid] = used
        return [
            {"pid": pid, "name": self._name(pid), "bytes": used}
            for pid, used in sorted(found.items())
        ]

    def _name(self, pid):  # type: (int) -> str | None
        if pid not in self._names:
            name = None
            try:
                with open(f"/proc/{pid}/comm") as f:
                    name = f.read().strip() or None
            except OSError:
                psutil_module = sys.modules.get("psutil")
                if psutil_module is not None:
                    try:
                        name = psutil_module.Process(pid).name()
                    except Exception:
                        name = None
            if len(self._names) > 4096:
                self._names.clear()
            self._names[pid] = name
        return self._names[pid]

    @staticmethod
    def _shutdown(nv):  # type: (Any) -> None
        try:
            nv.nvmlShutdown()
        except Exception:
            pass

    def close(self):  # type: () -> None
        if self.nv is not None:
            self._shutdown(self.nv)
            self.nv = None
