"""The hardware panel's GPU rows for AMD and Apple, from their fixtures read by the real
readers (tests/support/hw_fixtures.py), and a chat answer's J/token line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.hw_fixtures import IOREG_M1PRO, amd_sysfs_tree, ioreg_runner
from tui.app.answer_energy import AnswerEnergy
from tui.app.widgets.hardware_panel import HardwarePanel, hardware_text
from tui.core.timeline import RequestTimeline
from tui.telemetry.devices.amd_gpu import AmdGpus
from tui.telemetry.devices.apple_gpu import AppleGpu
from tui.telemetry.devices.nvml import NvmlProbe, NvmlSample
from tui.telemetry.energy_track import EnergyTrack
from tui.telemetry.gpus import LocalGpus
from tui.telemetry.sampler import LocalSource, TelemetrySample


class AbsentNvml:
    def nvmlInit(self) -> None:  # noqa: N802
        raise RuntimeError("Driver Not Loaded")


def _sample(tmp_path: Path, wired_mb: bytes = b"0\n") -> TelemetrySample:
    apple = AppleGpu(
        run=ioreg_runner(IOREG_M1PRO.read_bytes(), wired_mb=wired_mb), working_set=lambda: None
    )
    gpus = LocalGpus(
        NvmlProbe(AbsentNvml()), AmdGpus(str(amd_sysfs_tree(tmp_path)), None, False), apple
    )
    src = LocalSource(gpus=gpus, rapl_root=None)
    src.start()
    try:
        return src.sample(None)
    finally:
        src.close()


def test_amd_and_apple_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tui.telemetry.devices.apple_gpu.shutil.which", lambda name: None)
    text = hardware_text(_sample(tmp_path), None).plain
    lines = text.splitlines()
    amd = next(x for x in lines if x.startswith("GPU0 "))
    assert amd == (
        "GPU0 AMD Radeon RX 7900 XTX: util 37% mem 6.0 GiB/24.0 GiB 231 W 54°C gfx 2482 MHz"
    )
    apple = next(x for x in lines if x.startswith("GPU1 "))
    # unified memory in use against the working-set budget — never VRAM
    assert apple == "GPU1 Apple M1 Pro: util 63% in use 2.1 GiB of RAM (budget unknown)"
    assert "  power: needs macmon (brew install macmon; reads IOReport without sudo)" in lines


def test_apple_budget_from_the_wired_limit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("tui.telemetry.devices.apple_gpu.shutil.which", lambda name: None)
    text = hardware_text(_sample(tmp_path, wired_mb=b"24576\n"), None).plain
    assert "GPU1 Apple M1 Pro: util 63% in use 2.1 GiB of RAM (budget 24.0 GiB)" in text


async def test_the_panel_widget_shows_them(tmp_path: Path, monkeypatch) -> None:
    from textual.app import App

    monkeypatch.setattr("tui.telemetry.devices.apple_gpu.shutil.which", lambda name: None)
    sample = _sample(tmp_path)

    class Host(App[None]):
        def compose(self):  # type: ignore[no-untyped-def]
            yield HardwarePanel()

    async with Host().run_test(size=(100, 20)) as pilot:
        panel = pilot.app.query_one(HardwarePanel)
        panel.show(sample, [10.0, 20.0], None)
        await pilot.pause()
        assert "AMD Radeon RX 7900 XTX" in panel.text and "Apple M1 Pro" in panel.text
        assert "of RAM" in panel.text


class _Turn:
    def __init__(self) -> None:
        self.added: list[str] = []

    def add_to_summary(self, text: str) -> None:
        self.added.append(text)


def test_an_answer_gets_its_j_per_token_once_a_later_reading_came() -> None:
    """The chat's per-answer line: the answer's E2E window against the sampler's track."""
    from tui.telemetry.devices.nvml import GpuSample
    from tui.telemetry.energy_track import monotonic_from_perf_ns

    tl = RequestTimeline(t_sent_ns=1_000_000_000, t_end_ns=3_000_000_000)
    t0, t1 = monotonic_from_perf_ns(tl.t_sent_ns or 0), monotonic_from_perf_ns(tl.t_end_ns or 0)
    track = EnergyTrack()

    def reading(t: float, joules: float) -> TelemetrySample:
        g = GpuSample(0, "NVIDIA H200", energy_j=joules, energy_source="NVML total-energy counter")
        return TelemetrySample(t, None, NvmlSample("ok", "1", [g]))

    waiting = AnswerEnergy()
    turn = _Turn()
    waiting.expect(turn, tl, 100)
    track.push(reading(t0 - 0.2, 1000.0))
    track.push(reading(t1 - 0.1, 1000.0 + 300.0 * (t1 - 0.1 - (t0 - 0.2))))
    waiting.settle(track)
    assert turn.added == [] and waiting.waiting  # no reading after the end yet
    track.push(reading(t1 + 0.3, 1000.0 + 300.0 * (t1 + 0.3 - (t0 - 0.2))))
    waiting.settle(track)
    assert turn.added == ["6 J/tok (GPU0 counter)"] and not waiting.waiting  # 300 W × 2 s
