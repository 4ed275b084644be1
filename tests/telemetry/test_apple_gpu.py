"""Apple Silicon's GPU (tui/telemetry/devices/apple_gpu.py, apple_chips.py) against an ioreg
plist with the documented IOAccelerator property names and a stand-in ``macmon pipe``
printing its documented JSON. No Mac here: these are fixtures, not a Mac."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.hw_fixtures import IOREG_M1PRO, MACMON_LINE, fake_macmon, ioreg_runner
from tui.telemetry.device_dicts import energy_from_dicts, gpu_from_dict
from tui.telemetry.devices.apple_chips import CHIPS, chip_bandwidth, chip_name
from tui.telemetry.devices.apple_gpu import (
    AppleGpu,
    MacmonPower,
    parse_ioreg_accelerators,
    parse_macmon_line,
)


@pytest.fixture(autouse=True)
def no_macmon_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a Mac without macmon (a test that wants one passes its stand-in)."""
    monkeypatch.setattr("tui.telemetry.devices.apple_gpu.shutil.which", lambda name: None)


def test_ioreg_gives_utilisation_and_the_unified_memory_in_use() -> None:
    (entry,) = parse_ioreg_accelerators(IOREG_M1PRO.read_bytes())
    assert entry == {
        "model": "Apple M1 Pro",
        "gpu_cores": 16,
        "util_percent": 63.0,
        "mem_used": 2254438400,
    }


@pytest.mark.parametrize(
    "data, says",
    [
        (b"", "not a plist"),
        (b"<plist><array><dict><key>x</key>", "not a plist"),
        (
            b'<?xml version="1.0"?><!DOCTYPE plist [<!ENTITY a "aaaa">]><plist><string>&a;</string>'
            b"</plist>",
            "not a plist",
        ),  # entity declarations are refused
        (
            b"<plist><array><dict><key>IOClass</key><string>x</string></dict></array></plist>",
            "no IOAccelerator entry",
        ),
        (b"x" * (5 << 20), "too large"),
    ],
)
def test_hostile_ioreg_output_is_a_message(data: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_ioreg_accelerators(data)


def test_hostile_values_inside_a_valid_plist_read_as_unknown() -> None:
    data = IOREG_M1PRO.read_bytes().replace(b"<integer>63</integer>", b"<integer>640</integer>")
    # a control character a terminal would act on (XML cannot carry ESC itself)
    bidi = "<string>Apple \u202e M1 Pro</string>".encode()
    data = data.replace(b"<string>Apple M1 Pro</string>", bidi)
    (entry,) = parse_ioreg_accelerators(data)
    assert entry["util_percent"] is None and entry["model"] is None


def test_the_row_is_unified_memory_with_the_working_set_budget() -> None:
    run = ioreg_runner(IOREG_M1PRO.read_bytes(), wired_mb=b"24576\n")
    gpu = AppleGpu(run=run, working_set=lambda: None)
    gpu.start()
    devices, message, cpu = gpu.read()
    assert message == "Apple GPU (IORegistry, no sudo)" and cpu == []
    g = gpu_from_dict(0, devices[0])
    assert g is not None and g.vendor == "apple" and g.unified_memory
    assert g.name == "Apple M1 Pro" and g.gpu_cores == 16 and g.util_percent == 63.0
    assert g.mem_used == 2254438400 and g.mem_total == 24576 * 2**20
    assert g.mem_total_source == "sysctl iogpu.wired_limit_mb"
    assert g.peak_bandwidth_bps == 200e9 and "Apple chip table" in str(g.peak_bandwidth_source)
    assert g.power_w is None and g.note is not None and "needs macmon" in g.note


def test_without_a_wired_limit_metal_gives_the_budget_or_it_is_unknown() -> None:
    run = ioreg_runner(IOREG_M1PRO.read_bytes(), wired_mb=b"0\n")
    gpu = AppleGpu(run=run, working_set=lambda: 21 * 2**30)
    gpu.start()
    assert gpu.read()[0][0]["mem_total_source"] == "Metal recommendedMaxWorkingSetSize"
    gpu = AppleGpu(run=run, working_set=lambda: None)
    gpu.start()
    assert gpu.read()[0][0]["mem_total"] is None  # no fake VRAM, no guessed budget


def test_ioreg_runs_at_most_once_a_second() -> None:
    run = ioreg_runner(IOREG_M1PRO.read_bytes())
    now = [100.0]
    gpu = AppleGpu(run=run, working_set=lambda: None, clock=lambda: now[0])
    gpu.start()
    for t in (100.0, 100.5, 100.9, 101.0, 101.4):
        now[0] = t
        assert gpu.read()[0][0]["util_percent"] == 63.0
    assert sum(1 for c in run.calls if c[0] == "ioreg") == 2  # at 100.0 and 101.0


def test_no_ioreg_is_a_message_not_a_crash() -> None:
    gpu = AppleGpu(run=ioreg_runner(None), working_set=lambda: None)
    gpu.start()
    devices, message, _ = gpu.read()
    assert devices == [] and "ioreg gave nothing" in message


def test_macmon_lines_as_documented_and_hostile_ones() -> None:
    got = parse_macmon_line(json.dumps(MACMON_LINE).encode())
    assert got == {
        "gpu_w": 0.017451683,
        "cpu_w": 0.20486385,
        "gpu_temp_c": 36.95167,
        "gpu_mhz": 461,
    }
    for bad in (
        b"not json",
        b"[1,2]",
        b'{"gpu_power": "hot"}',
        b'{"gpu_power": 1e999}',
        b'{"gpu_power": -3}',
        b"{" + b" " * 70000 + b"}",
    ):
        assert parse_macmon_line(bad) is None


def test_power_from_a_running_macmon(tmp_path: Path) -> None:
    """The real reader thread and process handling, on a stand-in macmon that first prints
    garbage and an over-long line, then documented JSON lines."""
    cmd = fake_macmon(tmp_path, [4.0, 5.5, 7.25], extra=(b"garbage\n", b"x" * 70000 + b"\n"))
    mac = MacmonPower(interval_s=0.1, command=cmd)
    assert mac.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = mac.latest()
            if got is not None and got["gpu_w"] == 7.25:
                break
            time.sleep(0.02)
        assert got is not None and got["gpu_w"] == 7.25 and got["cpu_w"] == 0.20486385
        gpu = AppleGpu(
            run=ioreg_runner(IOREG_M1PRO.read_bytes()), macmon=mac, working_set=lambda: None
        )
        devices, _, cpu = gpu.read()
        assert devices[0]["power_w"] == 7.25
        assert devices[0]["power_source"] == "macmon gpu_power (IOReport)"
        (reading,) = energy_from_dicts(cpu)
        assert reading.domain == "CPU (macmon)" and reading.watts == 0.20486385
    finally:
        mac.close()


def test_macmon_missing_says_what_power_needs(tmp_path: Path) -> None:
    mac = MacmonPower(command=[str(tmp_path / "no-such-macmon")])
    assert not mac.start() and "did not start" in mac.message


@pytest.mark.parametrize(
    "text, cores, gbs",
    [
        ("Apple M1", 8, 68.25),
        ("Apple M1 Pro", 14, 200),
        ("Apple M2 Ultra", 76, 800),
        ("Apple M3 Max", 30, 300),
        ("Apple M3 Max", 40, 400),
        ("Apple M4 Pro", 20, 273),
        ("Apple M4 Max", 32, 410),
        ("Apple M4 Max", 40, 546),
    ],
)
def test_chip_table(text: str, cores: int, gbs: float) -> None:
    chip = chip_bandwidth(text, cores)
    assert chip is not None and chip.bandwidth_gbs == gbs


def test_chip_table_never_guesses() -> None:
    assert chip_bandwidth("Apple M3 Max", None) is None  # 300 or 400: the cores decide
    assert chip_bandwidth("Apple M3 Max", 36) is None
    assert chip_bandwidth("Apple M9", 10) is None and chip_bandwidth("Intel Xeon") is None
    assert chip_name("Apple M2 Pro") == "M2 Pro" and chip_name("AMD Radeon") is None


def test_every_figure_cites_its_source() -> None:
    for chip in CHIPS:
        assert "http" in chip.source or "AnandTech" in chip.source, chip.name
    families = {c.name.split()[0] for c in CHIPS}
    assert families == {"M1", "M2", "M3", "M4"}
