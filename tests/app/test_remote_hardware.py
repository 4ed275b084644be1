"""The hardware panel with a remote source: it says whose hardware it shows, follows slot A's
engine (Ctrl+N), and shows a lost link as a line above the last good numbers while the app
keeps running.

The DCGM exporter page is a fixture written from DCGM's documented metric names (the
exporter needs an NVIDIA GPU); the SSH source runs the real agent through a real sshd on
loopback (tests/support/sshd_server.py).
"""

from __future__ import annotations

import time

import psutil
import pytest

from tests.app.app_support import SIZE, gen
from tests.support.exporter_fixtures import MetricsServer, dcgm_page
from tests.support.off_cpu import run_delay_s
from tests.support.sshd_server import BARE_PATH, HOST_ALIAS, VENV_BIN, Sshd
from tui.app.widgets.hardware_panel import HardwarePanel
from tui.app.widgets.prompt import PromptInput
from tui.core.metrics import RequestMetrics
from tui.telemetry.devices.nvml import GpuSample, NvmlSample
from tui.telemetry.sampler import TelemetrySample

pytestmark = pytest.mark.e2e


@pytest.fixture
def sshd(tmp_path):  # type: ignore[no-untyped-def]
    server = Sshd(tmp_path / "sshd", f"{VENV_BIN}:{BARE_PATH}")
    server.start()
    yield server
    server.stop()


class Heartbeat:
    """A UI timer's ticks: the longest gap says whether the event loop ever froze.

    A gap is the wall time between two ticks less the time the UI thread waited for a
    CPU meanwhile (tests/support/off_cpu.py): on a busy machine the operating system runs
    other processes before ours, which is no freeze of ours; a blocking call, or our own
    work holding the loop (or the GIL), is still all there."""

    def __init__(self) -> None:
        self.ticks: list[tuple[float, float]] = []

    def __call__(self) -> None:
        self.ticks.append((time.monotonic(), run_delay_s()))

    def longest_gap(self, since: float) -> float:
        t = [x for x in self.ticks if x[0] >= since]
        return max(
            ((b[0] - a[0]) - (b[1] - a[1]) for a, b in zip(t, t[1:], strict=False)),
            default=0.0,
        )


# wall clock: the UI must never freeze for 1 s while a link is lost (Heartbeat, less the
# time the OS gave our CPU to others); a blocking connect or retry in the UI thread takes
# seconds, a frame a few ms of CPU
@pytest.mark.timing
async def test_panel_names_the_remote_source_and_shows_a_lost_link(
    make_config, build_app, wait_for, sshd, monkeypatch
):
    server = MetricsServer(dcgm_page()).start()
    monkeypatch.setenv("PATH", f"{sshd.client()}:{BARE_PATH}:{VENV_BIN}")  # our `ssh` first
    cfg = make_config(
        'default_engine = "dgx"\n[telemetry]\ninterval_s = 0.2\n'
        + gen(20)
        + '[engines.dgx]\nkind = "synthetic"\noptions = { tokens_per_s = 100 }\n'
        + f'telemetry = "{server.url}"\n'
        + '[engines.other]\nkind = "synthetic"\noptions = { tokens_per_s = 100 }\n'
    )
    app = build_app(cfg, telemetry=True, telemetry_source=f"ssh://{HOST_ALIAS}")
    beat = Heartbeat()
    try:
        async with app.run_test(size=SIZE) as pilot:
            app.set_interval(0.05, beat)
            panel = app.chat.query_one(HardwarePanel)
            await wait_for(pilot, lambda: "NVIDIA H100" in panel.text, 20)
            assert panel.border_title == f"hardware · dcgm {server.url}"
            assert "util 97%" in panel.text and "612 W" in panel.text
            assert "CPU, RAM: not in this source's metrics" in panel.text
            # the link is lost: said above the last good numbers, the app keeps going
            server.stop()
            t0 = time.monotonic()
            await wait_for(pilot, lambda: "remote telemetry lost" in panel.text, 20)
            assert "retrying in" in panel.text and "NVIDIA H100" in panel.text
            prompt = app.chat.query_one(PromptInput)
            prompt.focus()
            await pilot.press(*"still typing")
            assert prompt.text == "still typing"
            prompt.text = ""
            await app.chat.submit_text("Hi.")
            await wait_for(pilot, lambda: not app.chat.busy, 30)
            assert beat.longest_gap(t0) < 1.0, beat.longest_gap(t0)
            # Ctrl+N: an engine with no telemetry of its own shows --telemetry's source
            t1 = time.monotonic()
            await pilot.press("ctrl+n")
            await wait_for(
                pilot, lambda: panel.border_title == f"hardware · {HOST_ALIAS} via ssh", 20
            )
            await wait_for(pilot, lambda: "RAM" in panel.text and "lost" not in panel.text, 60)
            assert "NVIDIA H100" not in panel.text and "engine RSS" not in panel.text
            # that host's link cut: said, numbers kept, nothing frozen
            sshd.stop()
            await wait_for(pilot, lambda: "remote telemetry lost" in panel.text, 20)
            assert "RAM" in panel.text
            assert beat.longest_gap(t1) < 1.0, beat.longest_gap(t1)
            sshd.start()  # back: the next retry connects, and quitting must end that ssh
            await wait_for(pilot, lambda: "lost" not in panel.text, 60)
        # the app has exited: its ssh client went with it
        left = [p for p in psutil.Process().children(recursive=True) if p.name() == "ssh"]
        assert left == [], left
    finally:
        server.stop()


def test_roofline_uses_the_remote_gpus_peak_only_where_one_is_reported(
    make_config, build_app, monkeypatch
):
    """The agent's NVML gives the remote GPU's peak; DCGM/nvitop give none: then config's
    peak_bandwidth_gbs, or no percentage — never an invented peak."""
    import tui.chat.hardware as hardware

    monkeypatch.setattr(hardware, "model_bytes", lambda info, spec: 10 * 10**9)
    cfg = make_config(
        '[engines.box]\nkind = "vllm"\nurl = "http://box:8000"\ntelemetry = "ssh://box"\n'
        '[engines.local]\nkind = "llamacpp"\nmodel = "default"\n'
    )
    m = RequestMetrics(ttft_ms=1.0, ttfr_ms=1.0, e2e_ms=10.0, decode_tps=100.0)

    def roofline_text(engine: str, m: RequestMetrics, s: TelemetrySample) -> str | None:
        return hardware.roofline_text(cfg, cfg.engines[engine], None, m, s)

    def sample(peak: float | None, source: str) -> TelemetrySample:
        gpu = GpuSample(0, "H200", peak_bandwidth_bps=peak)
        return TelemetrySample(0.0, None, NvmlSample("ok", "", [gpu]), source=source)

    agent = roofline_text("box", m, sample(4.8e12, "box via ssh"))
    assert agent is not None and "of 4800 GB/s peak (nvml)" in agent
    dcgm = roofline_text("box", m, sample(None, "dcgm http://box:9400/metrics"))
    assert dcgm is not None and "peak unknown" in dcgm
    # an in-process engine runs here, not on the remote GPU being shown
    local = roofline_text("local", m, sample(4.8e12, "box via ssh"))
    assert local is not None and "peak unknown" in local
    cfg.telemetry.peak_bandwidth_gbs = 3350
    dcgm = roofline_text("box", m, sample(None, "dcgm http://box:9400/metrics"))
    assert dcgm is not None and "of 3350 GB/s peak (config)" in dcgm
