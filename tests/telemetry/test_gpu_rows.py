"""Every vendor's GPU in one row shape, from fixtures, through the real readers: this
machine's source (LocalSource), the agent's JSON line and ``infertop doctor``; and the
energy counters (NVML, DCGM, RAPL) through to J/token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.hw_fixtures import (
    IOREG_M1PRO,
    EnergyNvml,
    FakeAmdSmi,
    amd_sysfs_tree,
    ioreg_runner,
    rapl_tree,
    set_rapl,
)
from tui.cli.doctor_hw import check_hardware
from tui.telemetry.devices.agent import Agent, dumps
from tui.telemetry.devices.amd_gpu import AmdGpus
from tui.telemetry.devices.apple_gpu import AppleGpu
from tui.telemetry.devices.nvml import ABSENT, OK, NvmlProbe
from tui.telemetry.gpus import LocalGpus
from tui.telemetry.remote.agent_lines import sample_from_line
from tui.telemetry.sampler import LocalSource


class AbsentNvml:
    """NVML with no driver: nvmlInit fails as NVMLError_DriverNotLoaded does."""

    def nvmlInit(self) -> None:  # noqa: N802
        raise RuntimeError("Driver Not Loaded")


@pytest.fixture(autouse=True)
def no_macmon_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui.telemetry.devices.apple_gpu.shutil.which", lambda name: None)


def _apple() -> AppleGpu:
    return AppleGpu(run=ioreg_runner(IOREG_M1PRO.read_bytes()), working_set=lambda: 21 * 2**30)


def _local(tmp_path: Path, nvml: object = None) -> LocalSource:
    root = amd_sysfs_tree(tmp_path)
    rapl_tree(root, energy_uj=7_000_000)
    gpus = LocalGpus(
        nvml=NvmlProbe(nvml or AbsentNvml()),
        amd=AmdGpus(str(root), use_amdsmi=False),
        apple=_apple(),
    )
    return LocalSource(gpus=gpus, rapl_root=str(root))


def test_this_machine_shows_amd_and_apple_gpus_from_fixtures(tmp_path: Path) -> None:
    src = _local(tmp_path)
    src.start()
    try:
        s = src.sample(None)
    finally:
        src.close()
    assert s.gpu.status == OK
    amd, apple = s.gpu.gpus
    assert (amd.index, amd.vendor, amd.util_percent) == (0, "amd", 37.0)
    assert (apple.index, apple.vendor, apple.unified_memory) == (1, "apple", True)
    assert apple.mem_total == 21 * 2**30 and apple.peak_bandwidth_bps == 200e9
    assert s.system is not None
    (cpu,) = s.system.energy
    assert cpu.domain == "CPU package 0" and cpu.joules == 7.0


def test_no_gpu_at_all_says_what_was_looked_for(tmp_path: Path) -> None:
    gpus = LocalGpus(nvml=NvmlProbe(AbsentNvml()), amd=AmdGpus(str(tmp_path), use_amdsmi=False))
    first = gpus.start()
    assert first.status == ABSENT
    assert "NVIDIA" in first.message and "no AMD GPU" in first.message


def test_nvml_energy_counter_gives_j_per_token(tmp_path: Path) -> None:
    nv = EnergyNvml(mj=5_000_000, mw=250_000)
    src = _local(tmp_path, nv)
    src.start()
    from tui.telemetry.energy_track import EnergyTrack

    track = EnergyTrack()
    try:
        for i, (mj, uj) in enumerate(
            [(5_000_000, 7_000_000), (5_125_000, 7_010_000), (5_250_000, 7_020_000)]
        ):
            nv.mj = mj
            set_rapl(tmp_path, uj)
            s = src.sample(None)
            track.push(type(s)(float(i) * 0.5, s.system, s.gpu, s.error))
    finally:
        src.close()
    nvidia = s.gpu.gpus[0]
    assert nvidia.energy_j == 5250.0 and nvidia.energy_source == "NVML total-energy counter"
    use = track.window(0.0, 1.0, output_tokens=100)
    assert use is not None
    by = {d.domain.split()[0]: d for d in use.domains}
    assert by["GPU0"].joules == pytest.approx(250.0) and by["GPU0"].method == "counter"
    assert by["CPU"].joules == pytest.approx(0.02)
    # AMD's fixture has power only (amdgpu documents no counter): integrated, an estimate
    assert by["GPU1"].method == "integrated" and by["GPU1"].joules == pytest.approx(231.0)
    assert use.estimated
    assert use.j_per_token == pytest.approx((250.0 + 0.02 + 231.0) / 100)


def test_agent_line_carries_amd_apple_and_energy(tmp_path: Path) -> None:
    root = amd_sysfs_tree(tmp_path)
    rapl_tree(root, energy_uj=3_000_000)
    a = Agent(
        0.2,
        nvml=EnergyNvml(),
        amd=AmdGpus(str(root), smi=FakeAmdSmi()),
        apple=_apple(),
        root=str(root),
    )
    try:
        line = dumps(a.sample())
    finally:
        a.close()
    data = json.loads(line)
    vendors = [d["vendor"] for d in data["gpu"]["devices"]]
    assert vendors == ["nvidia", "amd", "apple"] and data["gpu"]["status"] == OK
    assert [d["index"] for d in data["gpu"]["devices"]] == [0, 1, 2]
    assert data["gpu"]["unified_memory"] is True
    assert data["energy"][0]["domain"] == "CPU package 0"
    s = sample_from_line(line, "mac via ssh", 1.0)
    nv, amd, apple = s.gpu.gpus
    assert nv.energy_j == 5000.0 and amd.name == "AMD Instinct MI300X"
    assert amd.energy_source == "amdsmi energy accumulator"
    assert apple.unified_memory and apple.mem_used == 2254438400
    assert apple.peak_bandwidth_source is not None and "M1 Pro" in apple.peak_bandwidth_source
    assert s.system is not None and s.system.energy[0].joules == 3.0


def test_agent_on_a_mac_labels_unified_memory(monkeypatch, tmp_path: Path) -> None:
    from tui.telemetry.devices import agent as agent_module

    monkeypatch.setattr(agent_module.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(agent_module.platform, "machine", lambda: "arm64")
    a = Agent(0.2, apple=_apple(), root=str(tmp_path))
    data = json.loads(dumps(a.sample()))
    assert data["mem"]["label"] == "unified memory (RAM)"
    (apple,) = data["gpu"]["devices"]
    assert apple["vendor"] == "apple" and apple["mem_total_source"] is not None


def test_doctor_shows_each_gpu_and_where_energy_comes_from(tmp_path: Path) -> None:
    said: list[tuple[str, str, str]] = []
    check_hardware(lambda s, w, d: said.append((s, w, d)), _local(tmp_path, EnergyNvml()), 0)
    by_what: dict[str, list[str]] = {}
    for _status, what, detail in said:
        by_what.setdefault(what, []).append(detail)
    assert by_what["NVIDIA GPU"][0].startswith("GPU0 NVIDIA H200 (nvidia)")
    assert "AMD Radeon RX 7900 XTX (amd)" in by_what["AMD GPU"][0]
    apple = by_what["Apple GPU"][0]
    assert "unified memory (RAM)" in apple and "16-core GPU" in apple
    assert "Apple chip table" in apple and "needs macmon" in apple
    energy = " | ".join(by_what["energy (GPU)"] + by_what["energy (CPU)"])
    assert "GPU0: NVML total-energy counter (counter)" in energy
    assert "GPU1: no energy counter: integrated from amdgpu hwmon power1_average" in energy
    assert "CPU package 0: RAPL energy_uj (powercap) (counter)" in energy
    verified = by_what["verified on"]
    assert any(v.startswith("real hardware: NVIDIA via NVML") for v in verified)
    assert any(v.startswith("fixtures only: Apple GPU via IORegistry") for v in verified)
    assert any(v.startswith("fixtures only: AMD via amdgpu sysfs") for v in verified)


def test_counter_and_integrated_power_agree_on_a_steady_load() -> None:
    """What benchmarks/energy_vs_power.py checks on a real GPU (within 5 %), on a
    synthetic steady 300 W load: the two methods of tui/core/energy.py agree."""
    from tui.core.energy import EnergyPoint, counter_energy, integrated_energy

    pts = [EnergyPoint(t / 2, joules=300.0 * t / 2, watts=300.0) for t in range(21)]
    by_counter = counter_energy(pts, 1.2, 8.7)[0]
    by_power = integrated_energy(pts, 1.2, 8.7)[0]
    assert by_counter is not None and by_power is not None
    assert abs(by_counter - by_power) / by_counter < 0.05


@pytest.mark.parametrize("machine, apple_rows", [("arm64", 1), ("x86_64", 0)])
def test_the_apple_reader_starts_on_apple_silicon_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, machine: str, apple_rows: int
) -> None:
    """By default (no reader given) an Apple Silicon Mac reads ioreg; an Intel Mac's GPU
    is not unified memory and is not read as one."""
    import tui.telemetry.devices.apple as apple_module

    monkeypatch.setattr(apple_module.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(apple_module.platform, "machine", lambda: machine)
    monkeypatch.setattr(
        "tui.telemetry.devices.apple_gpu.apple_run", ioreg_runner(IOREG_M1PRO.read_bytes())
    )
    monkeypatch.setattr("tui.telemetry.devices.apple_gpu.apple_metal_working_set", lambda: None)
    gpus = LocalGpus(nvml=NvmlProbe(AbsentNvml()), amd=AmdGpus(str(tmp_path), use_amdsmi=False))
    first = gpus.start()
    gpus.close()
    assert [g.vendor for g in first.gpus] == ["apple"] * apple_rows


def test_hostile_energy_and_vendor_fields_in_an_agent_line() -> None:
    line = json.dumps(
        {
            "v": 1,
            "cpu": {"percent": 5, "per_core": []},
            "mem": {"used": 1, "total": 2},
            "gpu": {
                "status": "ok",
                "devices": [
                    {
                        "name": "x",
                        "vendor": "evil",
                        "unified_memory": "yes",
                        "energy_j": -5,
                        "energy_source": "\x1b]0;title\x07",
                        "gpu_cores": 1e300,
                    }
                ],
            },
            "energy": [
                {"domain": "\x1b[2JCPU", "joules": 12.5, "wrap_j": -1},
                {"domain": 5, "joules": 1},
                {"domain": "CPU package 1", "joules": float("inf") if False else "1e999"},
                "not a reading",
                {"domain": "no numbers"},
            ],
        }
    )
    s = sample_from_line(line, "x", 0.0)
    (g,) = s.gpu.gpus
    assert g.vendor == "nvidia" and g.unified_memory is False and g.energy_j is None
    assert g.energy_source is not None and "\x1b" not in g.energy_source
    assert s.system is not None
    (r,) = s.system.energy
    assert r.domain == "?[2JCPU" and r.joules == 12.5 and r.wrap_j is None


def test_amdsmi_answers_that_are_not_numbers_read_as_unknown(tmp_path: Path) -> None:
    class Hostile(FakeAmdSmi):
        def amdsmi_get_gpu_activity(self, h):  # type: ignore[no-untyped-def]
            return {"gfx_activity": float("nan")}

        def amdsmi_get_gpu_vram_usage(self, h):  # type: ignore[no-untyped-def]
            return ["not", "a", "dict"]

        def amdsmi_get_power_info(self, h):  # type: ignore[no-untyped-def]
            return {"current_socket_power": "N/A", "average_socket_power": 1e12}

        def amdsmi_get_energy_count(self, h):  # type: ignore[no-untyped-def]
            return {"energy_accumulator": -3, "counter_resolution": 15.3}

        def amdsmi_get_gpu_asic_info(self, h):  # type: ignore[no-untyped-def]
            raise self.AmdSmiLibraryException("boom")

    d = AmdGpus(str(tmp_path), smi=Hostile()).read()[0][0]
    assert d["name"] == "AMD GPU" and d["util_percent"] is None
    assert d["mem_used"] is None and d["power_w"] is None and d["energy_j"] is None
