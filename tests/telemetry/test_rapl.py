"""The CPU package's energy counter (tui/telemetry/devices/rapl.py) against a powercap tree as the
kernel documents it, wraparound included. This machine has no /sys/class/powercap, so
there is no real-RAPL test here (doctor and the README say so)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.hw_fixtures import rapl_tree, set_rapl
from tui.telemetry.devices.rapl import RAPL_SOURCE, rapl_package_zones, read_rapl
from tui.telemetry.system import SystemProbe


def test_only_package_zones_are_read(tmp_path: Path) -> None:
    root = rapl_tree(tmp_path, energy_uj=5_000_000)
    assert [label for label, _ in rapl_package_zones(str(root))] == ["package-0"]
    (reading,), problem = read_rapl(str(root))
    assert problem is None
    assert reading == {
        "domain": "CPU package 0",
        "joules": 5.0,
        "wrap_j": 262143.32885,
        "counter_source": RAPL_SOURCE,
    }


def test_no_powercap_is_no_reading_and_no_complaint(tmp_path: Path) -> None:
    assert read_rapl(str(tmp_path)) == ([], None)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_counter_says_why(tmp_path: Path) -> None:
    root = rapl_tree(tmp_path, energy_uj=1)
    (root / "sys/class/powercap/intel-rapl:0/energy_uj").chmod(0)
    readings, problem = read_rapl(str(root))
    assert readings == [] and "root only" in (problem or "")


@pytest.mark.parametrize("text", ["-5", "12abc", "9" * 30, "\x00\x01", "1" * 100])
def test_hostile_counter_files_are_not_counters(tmp_path: Path, text: str) -> None:
    root = rapl_tree(tmp_path, energy_uj=1)
    (root / "sys/class/powercap/intel-rapl:0/energy_uj").write_text(text)
    readings, problem = read_rapl(str(root))
    assert readings == [] and "not a counter" in (problem or "")


def test_wraparound_through_the_system_probe_and_the_energy_track(tmp_path: Path) -> None:
    """The real probe reads the fake tree at each sample; the counter wraps between two
    samples and the energy over the window is still the energy used."""
    from tui.telemetry.devices.nvml import NvmlSample
    from tui.telemetry.energy_track import EnergyTrack
    from tui.telemetry.sampler import TelemetrySample

    wrap = 1_000_000_000  # µJ: 1000 J
    root = rapl_tree(tmp_path, energy_uj=wrap - 30_000_000, max_range_uj=wrap)
    probe = SystemProbe(str(root))
    track = EnergyTrack()
    for i, uj in enumerate([wrap - 30_000_000, wrap - 10_000_000, 10_000_000, 30_000_000]):
        set_rapl(root, uj)
        system = probe.sample(None)
        track.push(TelemetrySample(float(i), system, NvmlSample("absent", "none")))
    use = track.window(0.0, 3.0, output_tokens=30)
    assert use is not None
    (d,) = use.domains
    assert d.domain == "CPU package 0" and d.method == "counter"
    assert d.joules == pytest.approx(60.0) and use.j_per_token == pytest.approx(2.0)
