"""infertop's hardware agent: one JSON line per hardware sample on stdout.

Run as ``infertop agent [--interval S] [--once] [--no-gpu]``, or, where infertop is not
installed, fed to a remote ``python3 -`` over SSH (the SSH source does that) as one file:
this module after the readers it uses (amd_gpu.py, apple_gpu.py, rapl.py: the bundle,
tui/telemetry/remote/remote_ssh.py ``agent_source()``). So these modules are self-contained on
purpose: the standard library only at module level (psutil, pynvml and amdsmi are used
when importable), no ``tui`` imports but the readers' (skipped inside the bundle), and
Python 3.6 syntax (no walrus, no ``match``, no ``X | Y`` types, no ``from __future__``).
Types are PEP 484 type comments (``def f(x):  # type: (str) -> int | None``), which mypy
checks and Python ignores, so 3.6 never sees an annotation; their names come from
``typing`` under ``if False:`` (never imported at run time), and they may use 3.10+ type
syntax (``list[int]``, ``X | None``): only mypy reads them.

CPU and RAM come from psutil when it is importable, else from /proc (/proc/stat per-core
deltas, /proc/meminfo); NVIDIA GPUs from NVML (pynvml, from nvidia-ml-py); AMD GPUs from
amdsmi or the amdgpu sysfs files; Apple Silicon's GPU from IORegistry (and macmon for
power); the CPU packages' energy from RAPL. No GPU is a normal state of the sample
(``gpu.status == "absent"``), never an error. On Apple Silicon the GPU shares RAM: the
memory is labelled unified memory, and the GPU's memory is the RAM it has in use (no
fake VRAM).

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
``energy``      the CPU's energy readings: ``[{"domain", "joules" (a cumulative counter),
                "wrap_j" (its range), "watts", "counter_source", "power_source"}]``
                (RAPL packages; macmon's CPU power on a Mac); ``energy_note`` why there
                are none where RAPL exists but is not readable
``errors``      texts of probes that failed (the rest of the sample stands)

A GPU is ``{"index", "name", "uuid", "vendor" ("nvidia" | "amd" | "apple"),
"unified_memory", "util_percent", "mem_used", "mem_total" (bytes), "power_w",
"power_source", "energy_j" (a cumulative energy counter, J), "energy_source", "temp_c",
"sm_clock_mhz", "mem_clock_mhz", "bus_width_bits", "max_mem_clock_mhz", "gpu_cores"
(Apple), "mem_total_source" (Apple: whence the working-set budget), "note", "processes":
[{"pid", "name", "bytes"}]}``; a field the device does not report is null (or absent).
Peak memory bandwidth (bytes/s) = bus_width_bits / 8 × max_mem_clock_mhz × 10⁶ × 2
(double data rate). ``processes`` lists every process NVML says holds GPU memory
(compute and graphics), ``bytes`` null where NVML cannot tell. On Apple Silicon
``mem_used`` is the unified memory the GPU has in use and ``mem_total`` its working-set
budget (null when unknown).
"""

import json
import os
import platform
import socket
import sys
import time

if "_INFERTOP_AGENT_BUNDLE" not in globals():  # installed; the bundle defines these above
    from tui.telemetry.devices.agent_nvml import Gpus, nvml_text
    from tui.telemetry.devices.amd_gpu import AmdGpus
    from tui.telemetry.devices.apple_gpu import AppleGpu
    from tui.telemetry.devices.host_stats import CpuReader, is_apple_silicon, read_memory
    from tui.telemetry.devices.rapl import read_rapl

if False:  # typing only (never runs): names for the type comments, read by mypy alone
    from typing import Any, TextIO  # noqa: F401

FORMAT_VERSION = 1
UNIFIED_LABEL = "unified memory (RAM)"


def _import(name):  # type: (str) -> Any
    try:
        return __import__(name)
    except Exception:  # ImportError, or a broken install raising anything at import
        return None


# -- the agent --------------------------------------------------------------------------------
class Agent:
    """Reads this host's hardware; each ``sample()`` is one version-1 line's object.

    ``amd``/``apple``: GPU readers (tests pass fixture-backed ones); by default AMD is read
    from ``root``'s sysfs (or amdsmi) and Apple's GPU on Apple Silicon only; RAPL from
    ``root``'s powercap."""

    def __init__(
        self,
        interval_s=0.5,  # type: float
        gpu=True,  # type: bool
        use_psutil=True,  # type: bool
        nvml=None,  # type: Any
        amd=None,  # type: Any
        apple=None,  # type: Any
        root="/",  # type: str
    ):
        # type: (...) -> None
        self.interval_s = interval_s
        self.errors = []  # type: list[str]
        self.root = root
        psutil_module = _import("psutil") if use_psutil else None
        self._psutil = psutil_module
        try:
            self.cpu = CpuReader(psutil_module)  # type: CpuReader | None
        except Exception as e:
            self.cpu = None
            self.errors.append("cpu: " + nvml_text(e))
        self.label = UNIFIED_LABEL if is_apple_silicon() else "RAM"
        self.gpus = Gpus(gpu, nvml)
        self.others = []  # type: list[Any]  # AmdGpus, AppleGpu or a stand-in: read(), close()
        if gpu:
            self.others.append(amd if amd is not None else AmdGpus(root))
            if apple is None and is_apple_silicon():
                apple = AppleGpu(interval_s=interval_s)
            if apple is not None:
                try:
                    apple.start()
                except Exception as e:
                    self.errors.append("Apple GPU: " + nvml_text(e))
                self.others.append(apple)
        self.host = socket.gethostname()
        self.platform = f"{platform.system()} {platform.machine()}"

    @property
    def via(self):  # type: () -> str
        return self.cpu.via if self.cpu is not None else "none"

    def read_gpus(self):  # type: () -> tuple[dict[str, Any], list[dict[str, Any]]]
        """NVML's reading with the other vendors' GPUs after NVIDIA's (indices go on), and
        the CPU energy readings that came with them (macmon's CPU power)."""
        out = self.gpus.read()
        devices = list(out["devices"])
        found = [out["message"]] if devices else []
        missing = [] if devices or not self.others else ["NVIDIA: " + out["message"]]
        cpu_energy = []  # type: list[dict[str, Any]]
        for reader in self.others:
            try:
                got = reader.read()
            except Exception as e:  # a reader bug must not cost the sample
                missing.append(type(reader).__name__ + ": " + nvml_text(e))
                continue
            if len(got) > 2:
                cpu_energy.extend(got[2])
            for d in got[0]:
                d = dict(d)
                d["index"] = len(devices)
                devices.append(d)
            (found if got[0] else missing).append(got[1])
            if got[0] and got[0][0].get("unified_memory"):
                out["unified_memory"] = True
        if devices:
            out["status"], out["message"], out["devices"] = "ok", "; ".join(found), devices
        elif out["status"] != "error" and missing:
            out["message"] = "no GPU (" + "; ".join(missing) + ")"
        return out, cpu_energy

    def sample(self):  # type: () -> dict[str, Any]
        errors = list(self.errors)
        cpu = mem = None
        if self.cpu is not None:
            try:
                cpu = self.cpu.read()
            except Exception as e:
                errors.append("cpu: " + nvml_text(e))
        try:
            mem = read_memory(self._psutil, self.label)
        except Exception as e:
            errors.append("memory: " + nvml_text(e))
        if cpu is None and mem is None and not errors:
            errors.append("no psutil and no /proc here: CPU and RAM unknown")
        gpu, energy = self.read_gpus()
        note = None
        try:
            rapl, note = read_rapl(self.root)
            energy = rapl + energy
        except Exception as e:
            errors.append("energy: " + nvml_text(e))
        return {
            "v": FORMAT_VERSION,
            "t": time.time(),
            "host": self.host,
            "platform": self.platform,
            "via": self.via,
            "interval_s": self.interval_s,
            "cpu": cpu,
            "mem": mem,
            "gpu": gpu,
            "energy": energy,
            "energy_note": note,
            "errors": errors,
        }

    def close(self):  # type: () -> None
        self.gpus.close()
        for reader in self.others:
            close = getattr(reader, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass


def dumps(sample):  # type: (dict[str, Any]) -> str
    return json.dumps(sample, separators=(",", ":"), allow_nan=False)


def run(interval_s=0.5, once=False, gpu=True, out=None):
    # type: (float, bool, bool, TextIO | None) -> int
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


def parse_interval(text):  # type: (str) -> float
    value = float(text)
    if not (0 < value <= 3600):  # also refuses NaN
        raise ValueError("the interval must be > 0 and <= 3600 seconds")
    return value


def main(argv=None):  # type: (list[str] | None) -> int
    import argparse

    p = argparse.ArgumentParser(
        prog="infertop-agent", description="infertop's hardware agent: JSON lines on stdout"
    )
    p.add_argument("--interval", type=parse_interval, default=0.5, metavar="S")
    p.add_argument("--once", action="store_true")
    p.add_argument("--no-gpu", action="store_true")
    args = p.parse_args(argv)
    return run(args.interval, args.once, not args.no_gpu)


if __name__ == "__main__":  # python3 - --interval S   (this file on stdin)
    sys.exit(main())
