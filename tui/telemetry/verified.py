"""Which hardware sources were checked on real hardware, and which only against fixtures.

``infertop doctor`` prints this table and docs/hardware.md repeats it: a reader tested only
against fixtures written from documentation can still be wrong about a real device, and
the user should know which numbers stand on what. Update an entry when a source is run on
the real thing (and say where the record of that run is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a hardware source was checked (doctor's table says it).
Checked = Literal["real hardware", "fixtures only", "not run on the real thing"]
REAL: Checked = "real hardware"
FIXTURES: Checked = "fixtures only"
NOT_RUN: Checked = "not run on the real thing"


@dataclass(frozen=True)
class Verification:
    source: str
    status: Checked
    evidence: str


SOURCES: tuple[Verification, ...] = (
    Verification(
        "NVIDIA via NVML (util, memory, power, clocks, processes)",
        REAL,
        "NVIDIA H200: benchmarks/results/gpu_telemetry/h200.json, "
        "benchmarks/results/ui_hw_sample/h200.txt (benchmarks/agent_vs_nvml.py)",
    ),
    Verification(
        "NVML total-energy counter (J/token)",
        FIXTURES,
        "a stand-in NVML (nvmlDeviceGetTotalEnergyConsumption, mJ, per NVML's API "
        "reference); benchmarks/energy_vs_power.py is the check to run on a GPU",
    ),
    Verification(
        "CPU, RAM, engine RSS (psutil, /proc)",
        REAL,
        "this project's Linux test machines",
    ),
    Verification(
        "AMD via amdgpu sysfs (gpu_busy_percent, mem_info_vram_*, hwmon)",
        FIXTURES,
        "a sysfs tree written from the kernel's amdgpu documentation",
    ),
    Verification(
        "AMD via amdsmi",
        FIXTURES,
        "a stand-in module with amdsmi's documented calls and fields",
    ),
    Verification(
        "Apple GPU via IORegistry (ioreg IOAccelerator PerformanceStatistics)",
        FIXTURES,
        "an ioreg plist written with the property names published tools read (nvtop, "
        "all-smi); not recorded on a Mac",
    ),
    Verification(
        "Apple power via macmon",
        FIXTURES,
        "a stand-in macmon printing its documented `macmon pipe` JSON",
    ),
    Verification(
        "Apple chip bandwidth table",
        FIXTURES,
        "figures from Apple's releases and specs, cited in tui/telemetry/devices/apple_chips.py",
    ),
    Verification(
        "CPU package energy via RAPL (powercap energy_uj)",
        FIXTURES,
        "a powercap tree with wraparound; the test machines have no powercap",
    ),
    Verification(
        "DCGM exporter energy counter (fleet, exporter source)",
        FIXTURES,
        "exporter text with DCGM's documented metric names",
    ),
    Verification(
        "llama.cpp Metal build and setup.sh on macOS",
        NOT_RUN,
        "no Mac here: setup.sh's logic runs with a PATH of POSIX tools only and is checked "
        "for constructs bash 3.2 lacks (tests/scripts)",
    ),
)


def lines() -> list[str]:
    """ "real hardware: …" / "fixtures only: …", one per source."""
    return [f"{v.status}: {v.source} — {v.evidence}" for v in SOURCES]
