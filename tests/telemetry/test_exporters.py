"""The exporter hardware source: the real node_exporter, and DCGM / nvitop pages.

node_exporter runs for real (Debian's prometheus-node-exporter on a loopback port) and its
numbers are checked against psutil on this machine. NVIDIA's DCGM exporter and nvitop's
exporter cannot run without an NVIDIA GPU: their pages are fixtures written from their
documented metric names (tests/support/exporter_fixtures.py), served by a tiny HTTP server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from tests.support.exporter_fixtures import MetricsServer, dcgm_page, nvitop_page
from tests.support.sshd_server import free_port, wait_until
from tui.telemetry.remote.exporters import (
    NOTHING_KNOWN,
    ExporterSource,
    node_cpu,
    read_exporters,
)
from tui.telemetry.remote.remote_link import LinkLost
from tui.telemetry.sources import open_source, parse_source
from tui.transport.prometheus import fetch, parse

MIB = 2**20
NODE_EXPORTER = "prometheus-node-exporter"


@pytest.fixture
def node_exporter() -> Iterator[str]:
    exe = shutil.which(NODE_EXPORTER)
    if exe is None:
        pytest.fail("prometheus-node-exporter missing: run scripts/setup-e2e.sh")
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.cpu",
            "--collector.meminfo",
            "--collector.uname",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_until(lambda: _answers(url), 15, "node_exporter to answer")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _answers(url: str) -> bool:
    try:
        fetch(url, 1.0)
        return True
    except Exception:
        return False


def _source(url: str, **kw) -> ExporterSource:  # type: ignore[no-untyped-def]
    src = open_source(parse_source(url), 0.2)
    assert isinstance(src, ExporterSource)
    for k, v in kw.items():
        setattr(src, k, v)
    return src


def _first(src: ExporterSource, n: int = 1, timeout: float = 15):  # type: ignore[no-untyped-def]
    wait_until(lambda: src.samples >= n, timeout, f"{n} samples from {src.url}")
    return src.sample(None)


def _lost(src: ExporterSource) -> str | None:
    link = src.sample(None).link
    return link if link and link.startswith("remote telemetry lost") else None


def test_node_exporter_cpu_and_ram_agree_with_psutil(node_exporter):
    src = _source(node_exporter)
    src.start()
    try:
        s = _first(src, 2)
    finally:
        src.close()
    assert s.source == f"node_exporter {node_exporter}" and s.link is None
    assert s.system is not None and len(s.system.per_core) == os.cpu_count()
    vm = psutil.virtual_memory()
    assert s.system.ram_total == vm.total  # both read MemTotal
    assert abs(s.system.ram_used - (vm.total - vm.available)) < 0.05 * vm.total
    assert 0 <= s.system.cpu_percent <= 100
    assert s.gpu.status == "absent" and "no GPU metrics" in s.gpu.message
    # CPU % over one window: node_exporter's counters and psutil, side by side, with one
    # core kept busy in between
    a = fetch(node_exporter)
    psutil.cpu_percent(None)
    burn = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.time()+1.2\nwhile time.time()<t: pass"]
    )
    burn.wait()
    b = fetch(node_exporter)
    ours = psutil.cpu_percent(None)
    cpu = node_cpu(a, b)
    assert cpu is not None
    assert cpu[0] > 100 / (os.cpu_count() or 1) * 0.5  # the busy core shows
    assert abs(cpu[0] - ours) < 20, (cpu[0], ours)


def test_node_exporter_first_scrape_only_primes():
    page = (
        'node_cpu_seconds_total{cpu="0",mode="idle"} 100\n'
        'node_cpu_seconds_total{cpu="0",mode="user"} 50\n'
        'node_cpu_seconds_total{cpu="1",mode="idle"} 100\n'
        'node_cpu_seconds_total{cpu="1",mode="iowait"} 10\n'
        'node_cpu_seconds_total{cpu="1",mode="user"} 50\n'
        "node_memory_MemTotal_bytes 1000\nnode_memory_MemAvailable_bytes 250\n"
    )
    a = parse(page, t=0.0)
    first = read_exporters(a, None)
    assert first.primed_only and first.system is None
    b = parse(page.replace("} 50", "} 60").replace('mode="iowait"} 10', 'mode="iowait"} 20'))
    s = read_exporters(b, a).system
    assert s is not None
    assert s.per_core == [pytest.approx(100.0), pytest.approx(50.0)]  # iowait counts idle
    assert s.cpu_percent == pytest.approx(100 * 20 / 30)
    assert (s.ram_used, s.ram_total) == (750, 1000)


def test_dcgm_exporter_page():
    """A fixture from DCGM's documented metric names (DCGM needs an NVIDIA GPU)."""
    server = MetricsServer(dcgm_page()).start()
    src = _source(server.url)
    src.start()
    try:
        s = _first(src)
    finally:
        src.close()
        server.stop()
    assert s.source == f"dcgm {server.url}" and s.system is None  # DCGM has no CPU or RAM
    assert s.gpu.status == "ok" and [g.index for g in s.gpu.gpus] == [0, 1]
    g = s.gpu.gpus[0]
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert (g.util_percent, g.power_w, g.temp_c) == (97.0, 612.25, 61.0)
    assert (g.sm_clock_mhz, g.mem_clock_mhz) == (1980, 2619)
    assert g.mem_used == 72559 * MIB and g.mem_total == (72559 + 8000 + 530) * MIB
    assert g.peak_bandwidth_bps is None  # DCGM reports none: never invented
    assert s.gpu.gpus[1].util_percent == 3.0
    # the energy counter J/token is read from: mJ → J, named by its DCGM field
    assert g.energy_j == pytest.approx(81234.567)
    assert g.energy_source == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    assert g.power_source == "DCGM_FI_DEV_POWER_USAGE"


def test_dcgm_energy_counter_gives_j_per_token_over_a_window():
    """Two scrapes of the counter 2 s apart (a busy GPU using 3 kJ, an idle one 140 J)."""
    from tui.telemetry.energy_track import EnergyTrack

    track = EnergyTrack()
    for t, mj in ((10.0, (1_000_000, 50_000)), (12.0, (4_000_000, 190_000))):
        server = MetricsServer(dcgm_page(energy_mj=mj)).start()
        src = _source(server.url)
        src.start()
        try:
            s = _first(src)
        finally:
            src.close()
            server.stop()
        track.push(type(s)(t, s.system, s.gpu, s.error, s.source))
    use = track.window(10.0, 12.0, output_tokens=600)
    assert use is not None and not use.estimated
    assert use.joules == pytest.approx(3140.0)
    assert use.j_per_token == pytest.approx(3140.0 / 600)
    assert all(d.source == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" for d in use.domains)


def test_hostile_dcgm_energy_reads_as_unknown():
    page = dcgm_page().replace(" 81234567\n", " -5\n").replace(" 2345678\n", " NaN\n")
    server = MetricsServer(page).start()
    src = _source(server.url)
    src.start()
    try:
        s = _first(src)
    finally:
        src.close()
        server.stop()
    assert [g.energy_j for g in s.gpu.gpus] == [None, None]


def test_nvitop_exporter_page():
    """A fixture from nvitop-exporter's gauge names (nvitop needs an NVIDIA GPU)."""
    server = MetricsServer(nvitop_page()).start()
    src = _source(server.url)
    src.start()
    try:
        s = _first(src)
    finally:
        src.close()
        server.stop()
    assert s.source == f"nvitop {server.url}"
    assert s.system is not None and s.system.cpu_percent == 23.5 and s.system.per_core == []
    assert (s.system.ram_used, s.system.ram_total) == (12000 * MIB, 64000 * MIB)
    (g,) = s.gpu.gpus
    assert (g.index, g.name) == (0, "NVIDIA GeForce RTX 4090")
    assert (g.util_percent, g.power_w, g.temp_c) == (64.0, 355.5, 66.0)
    assert (g.mem_used, g.mem_total) == (20110 * MIB, 24564 * MIB)
    assert (g.sm_clock_mhz, g.mem_clock_mhz) == (2520, 10501)
    assert g.peak_bandwidth_bps is None


def test_failed_scrape_is_a_lost_link_with_backoff_then_recovers():
    server = MetricsServer(dcgm_page()).start()
    src = _source(server.url, backoff_s=(0.3, 0.6, 1.2))
    src.start()
    try:
        _first(src)
        server.stop()
        link = wait_until(lambda: _lost(src), 10, "the lost link")
        assert link.startswith("remote telemetry lost: ") and "retrying in" in link
        assert "Connect" in link and server.url not in link  # the URL is in the label
        assert src.sample(None).gpu.gpus[0].util_percent == 97.0  # last numbers kept
        wait_until(lambda: src.losses >= 2, 10, "a retry against the closed port")
        server = MetricsServer(dcgm_page(util=(55.0, 0.0)), port=server.port).start()
        wait_until(
            lambda: (
                src.sample(None).link is None and src.sample(None).gpu.gpus[0].util_percent == 55.0
            ),
            10,
            "the link back",
        )
        assert src.losses >= 2  # the first retry or more failed before the server returned
        server.status = 500
        assert "HTTP 500" in wait_until(lambda: _lost(src), 10, "HTTP 500")
    finally:
        src.close()
        server.stop()


def test_a_page_of_no_known_exporter_is_said_so():
    with pytest.raises(LinkLost, match="no known exporter metrics"):
        read_exporters(parse("# just a counter\nsome_counter_total 5\n"), None)
    server = MetricsServer("up 1\n").start()
    src = _source(server.url, backoff_s=(5.0,))
    src.start()
    try:
        link = wait_until(lambda: _lost(src), 10, "the complaint")
        assert NOTHING_KNOWN in link
    finally:
        src.close()
        server.stop()


def test_gpu_off_leaves_gpus_out():
    server = MetricsServer(dcgm_page()).start()
    src = open_source(parse_source(server.url), 0.2, gpu=False)
    src.start()
    try:
        s = wait_until(lambda: (x := src.sample(None)).link is None and x, 10, "a sample")
        assert s.gpu.status == "absent" and s.gpu.message == "GPU sampling off"
    finally:
        src.close()
        server.stop()
