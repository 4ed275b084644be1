"""The sampler switching sources while it runs, lost-link samples kept out of its history,
and the hardware summary ``infertop run --telemetry`` prints."""

from __future__ import annotations

import threading
import time

from tui.telemetry.devices.nvml import GpuSample, NvmlSample
from tui.telemetry.sampler import TelemetrySample, TelemetrySampler
from tui.telemetry.summary import HardwareWindow, format_line, summarize
from tui.telemetry.system import SystemSample


class Recorded:
    """A HardwareSource that records which thread started and closed it."""

    def __init__(self, name: str, link: str | None = None) -> None:
        self.label = name
        self.link = link
        self.events: list[tuple[str, str]] = []

    def start(self) -> None:
        self.events.append(("start", threading.current_thread().name))

    def sample(self, pid: int | None) -> TelemetrySample:
        system = SystemSample(cpu_percent=50.0, ram_used=1, ram_total=2)
        return TelemetrySample(
            time.monotonic(), system, NvmlSample("absent"), source=self.label, link=self.link
        )

    def close(self) -> None:
        self.events.append(("close", threading.current_thread().name))


def test_switching_source_while_running():
    a, b = Recorded("a"), Recorded("b", link="remote telemetry lost: x — retrying in 1 s")
    seen: list[str] = []
    sampler = TelemetrySampler(0.05, source=a, on_sample=lambda s: seen.append(s.source))
    sampler.start()
    try:
        deadline = time.monotonic() + 5
        while len(sampler.cpu) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        sampler.switch_source(b)
        while "b" not in seen:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.2)
    finally:
        sampler.stop()
    assert a.events == [("start", "telemetry"), ("close", "telemetry")]  # in its thread
    assert b.events == [("start", "telemetry"), ("close", "telemetry")]
    # the history started over and a lost link's repeated numbers were not added to it
    assert len(sampler.cpu) == 0 and sampler.latest is not None and sampler.latest.link


def test_switching_a_sampler_that_is_not_running_replaces_the_source():
    a, b = Recorded("a"), Recorded("b")
    sampler = TelemetrySampler(0.05, source=a)
    sampler.switch_source(b)
    assert sampler.source is b and a.events == []


def _sample(t: float, util: float | None, cpu: float, link: str | None = None) -> TelemetrySample:
    gpu = GpuSample(0, "H100", util_percent=util, mem_used=int(util or 0) * 2**30,
                    mem_total=80 * 2**30, power_w=None if util is None else 5 * util)  # fmt: skip
    system = SystemSample(cpu_percent=cpu, ram_used=2**30, ram_total=2**34)
    return TelemetrySample(t, system, NvmlSample("ok", "1", [gpu]), source="box via ssh", link=link)


def test_summary_peaks_means_and_nulls():
    samples = [_sample(1, 10, 20), _sample(2, 90, 40), _sample(3, None, 30)]
    h = summarize("box via ssh", samples, samples[-1])
    (g,) = h.gpus
    assert (g.util_percent_peak, g.util_percent_mean) == (90, 50)
    assert g.mem_used_peak_bytes == 90 * 2**30 and g.power_w_peak == 450
    assert g.temp_c_peak is None  # not reported: null, not 0
    assert (h.cpu_percent_mean, h.cpu_percent_peak) == (30, 40)
    line = format_line(h)
    assert line.startswith("hardware (box via ssh, 3 samples): GPU0 H100 util peak 90% mean 50%")
    assert "power peak 450 W" in line and "CPU mean 30% peak 40%" in line
    assert h.to_dict()["gpus"][0]["temp_c_peak"] is None


def test_summary_with_no_sample_says_why():
    lost = _sample(
        0, 5, 5, link="remote telemetry lost: Host key verification failed. — retrying in 2 s"
    )
    h = summarize("box via ssh", [], lost)
    assert h.samples == 0 and h.gpus == [] and h.cpu_percent_mean is None
    assert format_line(h) == (
        "hardware (box via ssh, 0 samples): no sample during the request "
        "(remote telemetry lost: Host key verification failed. — retrying in 2 s)"
    )


def test_window_keeps_fresh_samples_from_begin_to_the_one_after_end():
    w = HardwareWindow()
    w.add(_sample(time.monotonic(), 1, 1))  # before the request: not in it
    w.begin()
    w.add(_sample(time.monotonic(), 2, 2))
    w.add(_sample(time.monotonic(), 3, 3, link="lost"))  # a repeat: not fresh
    w.end()
    w.add(_sample(time.monotonic(), 4, 4))  # the one after the end
    w.add(_sample(time.monotonic(), 5, 5))
    w.wait_after_end(0.1)
    assert [s.gpu.gpus[0].util_percent for s in w.samples] == [2, 4]
    assert w.last is not None and w.last.gpu.gpus[0].util_percent == 5


def test_stop_waits_for_a_loop_run_in_another_thread_to_close_its_source():
    """The UI runs the loop in its own worker thread: stop() still returns only once the
    source is closed (a remote link's ssh ends before the app exits)."""
    a = Recorded("a")
    sampler = TelemetrySampler(0.05, source=a)
    t = threading.Thread(target=sampler.run, name="telemetry")
    t.start()
    deadline = time.monotonic() + 10
    while not a.events:  # the loop has started its source (a busy machine may be slow)
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sampler.switch_source(Recorded("pending"))  # not yet taken up: never started
    sampler.stop()
    assert a.events[-1][0] == "close"
    t.join(2)
