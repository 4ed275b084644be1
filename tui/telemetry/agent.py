"""infertop's hardware agent: one JSON line per hardware sample on stdout.

Run as ``infertop agent [--interval S] [--once] [--no-gpu]``, or, where infertop is not
installed, as this very file fed to a remote ``python3 -`` over SSH (the SSH source does
that). So this module is self-contained on purpose: the standard library only at module
level (psutil and pynvml are used when importable), no ``tui`` imports, and Python 3.6
syntax (no walrus, no ``match``, no ``X | Y`` types, no ``from __future__``).

CPU and RAM come from psutil when it is importable, else from /proc (/proc/stat per-core
deltas, /proc/meminfo); NVIDIA GPUs from NVML (pynvml, from nvidia-ml-py). No NVML, no
driver or no GPU is a normal state of the sample (``gpu.status == "absent"``), never an
error. On Apple Silicon the GPU shares RAM: the memory is labelled unified memory and no
GPU memory is reported (no fake VRAM).

Line format, version 1 — one JSON object per line, UTF-8, ending in a newline:

``v``           1, the format version (a reader refuses versions it does not know)
``t``           the agent's wall-clock time when the sample was taken (Unix seconds)
``host``        the host name (``socket.gethostname()``)
``platform``    ``"Linux x86_64"``, ``"Darwin arm64"``, ...
``via``         what read CPU and RAM: ``"psutil"``, ``"proc"`` or ``"none"``
``interval_s``  the sampling interval asked for
``cpu``         ``{"percent": P, "per_core": [P, ...]}``: the share (0–100) of all logical
                cores, and of each, busy since the previous sample; null when unknown
``mem``         ``{"used": B, "total": B, "label": "RAM" | "unified memory (RAM)"}``,
                bytes; used = total − available; null when unknown
``gpu``         ``{"status": "ok" | "absent" | "error", "message": text,
                "unified_memory": bool, "devices": [GPU, ...]}``
``errors``      texts of probes that failed (the rest of the sample stands)

A GPU is ``{"index", "name", "uuid", "util_percent", "mem_used", "mem_total" (bytes),
"power_w", "temp_c", "sm_clock_mhz", "mem_clock_mhz", "bus_width_bits",
"max_mem_clock_mhz", "processes": [{"pid", "name", "bytes"}]}``; a field the device does
not report is null. Peak memory bandwidth (bytes/s) = bus_width_bits / 8 ×
max_mem_clock_mhz × 10⁶ × 2 (double data rate). ``processes`` lists every process NVML
says holds GPU memory (compute and graphics), ``bytes`` null where NVML cannot tell.
"""

import json
import os
import platform
import socket
import sys
import time

FORMAT_VERSION = 1
UNIFIED_LABEL = "unified memory (RAM)"
APPLE_GPU_NOTE = "Apple GPU: memory is the unified memory shown as RAM"


def is_apple_silicon():
    return platform.system() == "Darwin" and platform.machine() in ("arm64", "aarch64")


def _import(name):
    try:
        return __import__(name)
    except Exception:  # ImportError, or a broken install raising anything at import
        return None


# -- CPU ----------------------------------------------------------------------------------
def read_proc_stat(path="/proc/stat"):
    """[(busy, total)] jiffies: the all-CPU line first, then cpu0, cpu1, ...

    total = user + nice + system + idle + iowait + irq + softirq + steal (guest time is
    already inside user and nice); busy = total − idle − iowait.
    """
    rows = []
    with open(path) as f:
        for line in f:
            if not line.startswith("cpu"):
                continue
            fields = line.split()
            values = [int(x) for x in fields[1:9]]
            values += [0] * (8 - len(values))
            total = sum(values)
            rows.append((total - values[3] - values[4], total))
    return rows


def cpu_percent_between(before, after):
    """(total %, [per core %]) from two read_proc_stat() readings."""
    out = []
    for (b0, t0), (b1, t1) in zip(before, after):
        dt = t1 - t0
        out.append(0.0 if dt <= 0 else max(0.0, min(100.0, 100.0 * (b1 - b0) / dt)))
    if not out:
        return None, []
    return out[0], out[1:]


class CpuReader:
    def __init__(self, psutil_module):
        self._psutil = psutil_module
        self._prev = None
        self.via = "none"
        if psutil_module is not None:
            psutil_module.cpu_percent(interval=None)
            psutil_module.cpu_percent(interval=None, percpu=True)
            self.via = "psutil"
        elif os.path.exists("/proc/stat"):
            self._prev = read_proc_stat()
            self.via = "proc"

    def read(self):
        if self.via == "psutil":
            total = self._psutil.cpu_percent(interval=None)
            per_core = self._psutil.cpu_percent(interval=None, percpu=True)
            return {"percent": float(total), "per_core": [float(x) for x in per_core]}
        if self.via == "proc":
            now = read_proc_stat()
            total, per_core = cpu_percent_between(self._prev, now)
            self._prev = now
            if total is None:
                return None
            return {"percent": round(total, 2), "per_core": [round(x, 2) for x in per_core]}
        return None


# -- memory ---------------------------------------------------------------------------------
def read_meminfo(path="/proc/meminfo"):
    """(used, total) bytes from /proc/meminfo: used = MemTotal − MemAvailable."""
    fields = {}
    with open(path) as f:
        for line in f:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                fields[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    total = fields["MemTotal"]
    available = fields.get("MemAvailable")
    if available is None:  # kernels before 3.14
        available = fields.get("MemFree", 0) + fields.get("Buffers", 0) + fields.get("Cached", 0)
    return total - available, total


def read_memory(psutil_module, label):
    if psutil_module is not None:
        vm = psutil_module.virtual_memory()
        return {"used": int(vm.total - vm.available), "total": int(vm.total), "label": label}
    if os.path.exists("/proc/meminfo"):
        used, total = read_meminfo()
        return {"used": used, "total": total, "label": label}
    return None


# -- NVIDIA GPUs ------------------------------------------------------------------------------
def _nvml_text(e):
    text = str(e).strip()
    return text or type(e).__name__


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Gpus:
    """NVML, opened once. ``read()`` never raises."""

    def __init__(self, enabled=True, nvml=None):
        self.nv = None
        self.handles = []
        self.static = []
        self.status = "absent"
        self.unified = False
        self._names = {}
        if not enabled:
            self.message = "GPU sampling off"
            return
        if is_apple_silicon():
            self.unified = True
            self.message = APPLE_GPU_NOTE
            return
        nv = nvml if nvml is not None else _import("pynvml")
        if nv is None:
            self.message = "no NVIDIA GPU (nvidia-ml-py not installed)"
            return
        try:
            nv.nvmlInit()
            count = nv.nvmlDeviceGetCount()
        except Exception as e:  # library, driver or device missing
            self.message = f"no NVIDIA GPU ({_nvml_text(e)})"
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
                        "name": _text(self._get(nv.nvmlDeviceGetName, h) or "NVIDIA GPU"),
                        "uuid": _text(self._get(nv.nvmlDeviceGetUUID, h) or "") or None,
                        "bus_width_bits": self._get(nv.nvmlDeviceGetMemoryBusWidth, h),
                        "max_mem_clock_mhz": self._get(
                            nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM
                        ),
                    }
                )
        except Exception as e:
            self.status, self.message = "error", "NVML error: " + _nvml_text(e)
            self.nv = nv
            return
        self.nv = nv
        self.status, self.message = "ok", f"{count} NVIDIA GPU(s)"

    @staticmethod
    def _get(fn, *args):
        """A field the device may not support: None on NotSupported-style errors."""
        try:
            return fn(*args)
        except Exception as e:
            if "Not Supported" in _nvml_text(e) or "NotSupported" in type(e).__name__:
                return None
            raise

    def read(self):
        out = {
            "status": self.status,
            "message": self.message,
            "unified_memory": self.unified,
            "devices": [],
        }
        nv = self.nv
        if nv is None or not self.handles:
            return out
        devices = []
        try:
            for i, h in enumerate(self.handles):
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                util = self._get(nv.nvmlDeviceGetUtilizationRates, h)
                power = self._get(nv.nvmlDeviceGetPowerUsage, h)
                temp = self._get(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
                device = {"index": i}
                device.update(self.static[i])
                device.update(
                    {
                        "util_percent": None if util is None else float(util.gpu),
                        "mem_used": int(mem.used),
                        "mem_total": int(mem.total),
                        "power_w": None if power is None else power / 1000.0,
                        "temp_c": None if temp is None else float(temp),
                        "sm_clock_mhz": self._get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                        "mem_clock_mhz": self._get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                        "processes": self._processes(h),
                    }
                )
                devices.append(device)
        except Exception as e:
            out["status"] = "error"
            out["message"] = "NVML error: " + _nvml_text(e)
            return out
        out["status"] = "ok"
        out["message"] = f"{len(devices)} NVIDIA GPU(s)"
        out["devices"] = devices
        return out

    def _processes(self, handle):
        nv = self.nv
        found = {}
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
                if pid in found and found[pid] is not None and used is not None:
                    used = max(used, found[pid])
                elif pid in found and used is None:
                    used = found[pid]
                found[pid] = used
        return [
            {"pid": pid, "name": self._name(pid), "bytes": used}
            for pid, used in sorted(found.items())
        ]

    def _name(self, pid):
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
    def _shutdown(nv):
        try:
            nv.nvmlShutdown()
        except Exception:
            pass

    def close(self):
        if self.nv is not None:
            self._shutdown(self.nv)
            self.nv = None


# -- the agent --------------------------------------------------------------------------------
class Agent:
    """Reads this host's hardware; each ``sample()`` is one version-1 line's object."""

    def __init__(self, interval_s=0.5, gpu=True, use_psutil=True, nvml=None):
        self.interval_s = interval_s
        self.errors = []
        psutil_module = _import("psutil") if use_psutil else None
        self._psutil = psutil_module
        try:
            self.cpu = CpuReader(psutil_module)
        except Exception as e:
            self.cpu = None
            self.errors.append("cpu: " + _nvml_text(e))
        self.label = UNIFIED_LABEL if is_apple_silicon() else "RAM"
        self.gpus = Gpus(gpu, nvml)
        self.host = socket.gethostname()
        self.platform = f"{platform.system()} {platform.machine()}"

    @property
    def via(self):
        return self.cpu.via if self.cpu is not None else "none"

    def sample(self):
        errors = list(self.errors)
        cpu = mem = None
        if self.cpu is not None:
            try:
                cpu = self.cpu.read()
            except Exception as e:
                errors.append("cpu: " + _nvml_text(e))
        try:
            mem = read_memory(self._psutil, self.label)
        except Exception as e:
            errors.append("memory: " + _nvml_text(e))
        if cpu is None and mem is None and not errors:
            errors.append("no psutil and no /proc here: CPU and RAM unknown")
        return {
            "v": FORMAT_VERSION,
            "t": time.time(),
            "host": self.host,
            "platform": self.platform,
            "via": self.via,
            "interval_s": self.interval_s,
            "cpu": cpu,
            "mem": mem,
            "gpu": self.gpus.read(),
            "errors": errors,
        }

    def close(self):
        self.gpus.close()


def dumps(sample):
    return json.dumps(sample, separators=(",", ":"), allow_nan=False)


def run(interval_s=0.5, once=False, gpu=True, out=None):
    """Print samples to ``out`` (stdout) every ``interval_s`` until the reader goes away.
    The first sample comes one interval after start (CPU use is a difference)."""
    out = out if out is not None else sys.stdout
    agent = Agent(interval_s, gpu)
    try:
        next_t = time.monotonic()
        while True:
            next_t += interval_s
            time.sleep(max(0.0, next_t - time.monotonic()))
            out.write(dumps(agent.sample()) + "\n")
            out.flush()
            if once:
                return 0
            if time.monotonic() > next_t + interval_s:
                next_t = time.monotonic()  # fell behind (suspended): do not burst
    except (BrokenPipeError, KeyboardInterrupt):
        # the reader went away (the SSH session ended): a normal end
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        except Exception:
            pass
        return 0
    finally:
        agent.close()


def parse_interval(text):
    value = float(text)
    if not (0 < value <= 3600):  # also refuses NaN
        raise ValueError("the interval must be > 0 and <= 3600 seconds")
    return value


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(prog="infertop-agent", description=__doc__.split("\n")[0])
    p.add_argument("--interval", type=parse_interval, default=0.5, metavar="S")
    p.add_argument("--once", action="store_true")
    p.add_argument("--no-gpu", action="store_true")
    args = p.parse_args(argv)
    return run(args.interval, args.once, not args.no_gpu)


if __name__ == "__main__":  # python3 - --interval S   (this file on stdin)
    sys.exit(main())
