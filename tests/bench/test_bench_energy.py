"""Energy per token in bench reports (tui/bench/energy.py, report_energy.py): per level,
per request where it ran alone, in report.json, report.md (a column and a section), the
CSV and the sweep's table — from a known energy counter, so the figures are known."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from tests.bench.synthetic import level, record
from tui.bench.report.files import write_report
from tui.bench.report.sweep import sweep_rows
from tui.bench.run.plan import BenchPlan
from tui.bench.run.runner import BenchRunner
from tui.bench.stats.energy import BenchEnergy, choose_source, level_energy
from tui.engines.base import EngineSpec
from tui.telemetry.devices.nvml import GpuSample, NvmlSample
from tui.telemetry.energy_track import EnergyTrack, monotonic_from_perf_ns
from tui.telemetry.sampler import TelemetrySample

WATTS = 50.0


def _reading(t: float, watts: float = WATTS) -> TelemetrySample:
    g = GpuSample(
        0,
        "Test GPU",
        energy_j=watts * t,
        energy_source="test counter",
        power_w=watts,
        power_source="test power",
    )
    return TelemetrySample(t, None, NvmlSample("ok", "1", [g]))


def test_level_and_per_request_energy_from_a_steady_counter() -> None:
    recs = [record(100.0 * i, 10.0, 8, 5.0, index=i) for i in range(3)]  # 45 ms each
    track = EnergyTrack()
    for ms in range(-20, 400, 10):
        track.push(_reading(monotonic_from_perf_ns(ms * 1_000_000)))
    got = level_energy(level(recs, 1), track)
    assert got is not None and not got["estimated"]
    window_s = (200 + 45) / 1000  # first sent → last ended
    assert got["joules"] == pytest.approx(WATTS * window_s, rel=1e-4)
    assert got["j_per_token"] == pytest.approx(WATTS * window_s / 24, rel=1e-4)
    assert got["domains"][0]["source"] == "test counter"
    # c=1: each request ran alone and has its own figure: 50 W × 45 ms ÷ 8 tokens
    assert set(got["requests"]) == {"r0", "r1", "r2"}
    assert got["j_per_token_median"] == pytest.approx(WATTS * 0.045 / 8, rel=1e-4)


def test_requests_running_at_once_get_no_figure_of_their_own() -> None:
    recs = [record(0.0, 10.0, 8, 5.0, level="c=2", concurrency=2, index=i) for i in range(2)]
    track = EnergyTrack()
    for ms in range(-20, 100, 10):
        track.push(_reading(monotonic_from_perf_ns(ms * 1_000_000)))
    got = level_energy(level(recs, 2), track)
    assert got is not None and "requests" not in got and got["j_per_token"] is not None


def test_energy_source_choice() -> None:
    assert choose_source("off", ["ssh://a"]) is None
    assert choose_source(None, ["ssh://gpu-box", "ssh://gpu-box"]) == "ssh://gpu-box"
    assert choose_source(None, ["ssh://a", None]) == "local"  # not all on one source
    assert choose_source(None, [None]) == "local"


class SteadySource:
    """A hardware source whose GPU's energy counter grows at WATTS (stands in for NVML)."""

    label = "steady test GPU"

    def start(self) -> None:
        pass

    def sample(self, pid: int | None) -> TelemetrySample:
        return _reading(time.monotonic())

    def close(self) -> None:
        pass


@pytest.fixture
async def energy_report(tmp_path: Path) -> Path:
    plan = BenchPlan(
        engines=["fast"], runs=3, warmup=1, concurrency=[1, 2], prompt_tokens=30, max_tokens=8
    )
    specs = [EngineSpec("fast", "pace", options={"token_ms": 5.0, "ttft_ms": 10.0})]
    energy = BenchEnergy("steady test GPU", interval_s=0.02, source=SteadySource())
    runner = BenchRunner(plan, specs)
    runner.result.energy, runner.result.energy_source = energy.track, energy.describe()
    energy.start()
    try:
        res = await runner.run()
        time.sleep(0.1)  # a reading after the last request
    finally:
        energy.stop()
    write_report(res, tmp_path)
    return tmp_path


def test_reports_carry_j_per_token_with_its_source(energy_report: Path) -> None:
    report = json.loads((energy_report / "report.json").read_text())
    assert report["energy_source"] == {"source": "steady test GPU", "interval_s": 0.02}
    (eng,) = report["summary"]["engines"]
    for lv in eng["levels"]:
        e = lv["energy"]
        assert e["domains"][0]["method"] == "counter"
        # a steady 50 W: the level's energy is 50 W × its window, to the reading
        assert e["joules"] == pytest.approx(WATTS * e["window_s"], rel=1e-4)
        assert e["j_per_token"] == pytest.approx(e["joules"] / lv["output_tokens"])
    md = (energy_report / "report.md").read_text()
    assert "| J/token |" in md.split("## Engines", 1)[1].split("\n\n", 2)[1]
    assert "## Energy per token" in md and "test counter" in md
    rows = list(csv.DictReader((energy_report / "report.csv").open()))
    c1 = [r for r in rows if r["level"] == "c=1" and r["status"] == "ok"]
    c2 = [r for r in rows if r["level"] == "c=2"]
    assert c1 and all(float(r["j_per_token"]) > 0 for r in c1)
    assert c2 and all(r["j_per_token"] == "" for r in c2)  # not attributable


def test_sweep_table_has_j_per_token_per_quant() -> None:
    sweep = {
        "rows": [
            {"engine": "e model=Q8_0", "quantisation": "Q8_0", "j_per_token": 0.42},
            {
                "engine": "e model=Q4_K_M",
                "quantisation": "Q4_K_M",
                "j_per_token": 0.31,
                "energy_estimated": True,
            },
        ]
    }
    head, rows = sweep_rows(sweep)
    col = head.index("J/token")
    assert [r[col] for r in rows] == ["0.42", "0.31 (est.)"]


def test_environment_lists_amd_gpus(tmp_path: Path) -> None:
    from tests.support.hw_fixtures import amd_sysfs_tree
    from tui.bench.run.environment import gpus

    got = [g for g in gpus(str(amd_sysfs_tree(tmp_path))) if g.get("vendor") == "amd"]
    assert got == [
        {
            "index": got[0]["index"],
            "name": "AMD Radeon RX 7900 XTX",
            "vendor": "amd",
            "memory_total_bytes": 24 * 2**30,
            "unified_memory": False,
        }
    ]
