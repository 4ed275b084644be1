"""AMD GPUs (tui/telemetry/devices/amd_gpu.py) against a sysfs tree written from the kernel's
amdgpu documentation and a stand-in amdsmi with its documented calls. No AMD GPU here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.hw_fixtures import FakeAmdSmi, amd_sysfs_tree
from tui.telemetry.device_dicts import gpu_from_dict
from tui.telemetry.devices.amd_gpu import AmdGpus, amd_card_dirs, amd_sysfs_device


def test_sysfs_reads_the_documented_files_in_their_units(tmp_path: Path) -> None:
    root = amd_sysfs_tree(tmp_path)
    cards = amd_card_dirs(str(root))
    assert [Path(c).name for c in cards] == ["card1"]  # not the Intel card, not DP-1
    d = amd_sysfs_device(0, cards[0])
    assert d["name"] == "AMD Radeon RX 7900 XTX" and d["vendor"] == "amd"
    assert d["util_percent"] == 37.0
    assert (d["mem_used"], d["mem_total"]) == (6 * 2**30, 24 * 2**30)
    assert d["power_w"] == pytest.approx(231.0)  # µW → W
    assert d["power_source"] == "amdgpu hwmon power1_average"
    assert d["temp_c"] == 54.0 and d["sm_clock_mhz"] == 2482 and d["mem_clock_mhz"] == 1249
    assert d["energy_j"] is None  # amdgpu documents no energy counter: J/token integrates


def test_hwmon_energy_counter_is_read_where_the_driver_has_one(tmp_path: Path) -> None:
    root = amd_sysfs_tree(tmp_path, energy_uj="123456789")
    d = amd_sysfs_device(0, amd_card_dirs(str(root))[0])
    assert d["energy_j"] == pytest.approx(123.456789)
    assert d["energy_source"] == "hwmon energy1_input"


def test_reader_gives_the_same_row_shape_as_nvidia(tmp_path: Path) -> None:
    amd = AmdGpus(str(amd_sysfs_tree(tmp_path, product=None)), use_amdsmi=False)
    devices, message = amd.read()
    assert message == "1 AMD GPU(s) (amdgpu sysfs)"
    g = gpu_from_dict(0, devices[0])
    assert g is not None and g.vendor == "amd" and g.name == "AMD GPU (device 0x744c)"
    assert g.util_percent == 37.0 and g.mem_total == 24 * 2**30 and not g.unified_memory


def test_no_amd_card_is_a_normal_state(tmp_path: Path) -> None:
    devices, message = AmdGpus(str(tmp_path), use_amdsmi=False).read()
    assert devices == [] and message.startswith("no AMD GPU")


@pytest.mark.parametrize(
    "busy, used, power",
    [
        ("not a number", "-5", "1e9"),
        ("250", "99999999999999999999999", "\x1b[2J"),
        ("\xff\xfe", "12 34", ""),
        ("37" * 5000, "0x10", "-1"),  # a file far longer than any sysfs value
    ],
)
def test_hostile_sysfs_values_read_as_unknown(tmp_path: Path, busy, used, power) -> None:
    root = amd_sysfs_tree(
        tmp_path, busy=busy, vram_used=used, power_uw=power, product="\x1b]0;pwned\x07"
    )
    d = amd_sysfs_device(0, amd_card_dirs(str(root))[0])
    assert d["util_percent"] is None and d["mem_used"] is None and d["power_w"] is None
    assert "\x1b" not in d["name"] and d["name"].startswith("AMD GPU")


def test_amdsmi_when_it_imports(tmp_path: Path) -> None:
    smi = FakeAmdSmi(accumulator=2_000_000)
    amd = AmdGpus(str(tmp_path), smi=smi)
    devices, message = amd.read()
    assert amd.via == "amdsmi" and message == "1 AMD GPU(s) (amdsmi)"
    d = devices[0]
    assert d["name"] == "AMD Instinct MI300X" and d["util_percent"] == 88.0
    assert (d["mem_used"], d["mem_total"]) == (51200 * 2**20, 196592 * 2**20)
    assert d["power_w"] == 612.0 and d["power_source"] == "amdsmi current_socket_power"
    assert d["temp_c"] == 71.0  # no edge sensor: the next documented one
    assert (d["sm_clock_mhz"], d["mem_clock_mhz"]) == (2100, 1300)
    assert d["energy_j"] == pytest.approx(2_000_000 * 15.3 / 1e6)
    amd.close()
    assert smi.shut


def test_amdsmi_before_6_2_1_calls_the_accumulator_power(tmp_path: Path) -> None:
    d = AmdGpus(str(tmp_path), smi=FakeAmdSmi(1000, old_energy_key=True)).read()[0][0]
    assert d["energy_j"] == pytest.approx(1000 * 15.3 / 1e6)


def test_amdsmi_failing_to_start_falls_back_to_sysfs(tmp_path: Path) -> None:
    class Broken(FakeAmdSmi):
        def amdsmi_init(self) -> None:
            raise self.AmdSmiLibraryException("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    amd = AmdGpus(str(amd_sysfs_tree(tmp_path)), smi=Broken())
    devices, message = amd.read()
    assert amd.via == "sysfs" and "sysfs" in message and devices[0]["util_percent"] == 37.0
