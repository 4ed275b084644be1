"""The fleet read back from a real Prometheus (Debian's 2.42, started here on a free
port with a temporary config and data folder) that scrapes fixture endpoints, a fixture
DCGM exporter (the real one needs an NVIDIA GPU) and a real node_exporter."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.support import fleet_fixture as ff
from tests.support import prometheus_server as ps
from tui.fleet.poller import Fleet, fleet_endpoints

WINDOW_S = 10.0


@pytest.fixture(scope="module")
def prom(fixture_fleet, tmp_path_factory) -> Iterator[tuple[ps.Process, list[str]]]:
    """Prometheus scraping every second: three vLLM fixtures (one shown as instance
    "gpu-box-1:8000", the DCGM fixture's Hostname), a llama-server fixture, a port where
    nothing listens, a data-parallel vLLM fixture, the DCGM fixture and node_exporter."""
    ps.require_binaries()
    work = tmp_path_factory.mktemp("prom")
    node = ps.start_node_exporter(work)
    addrs = [u.removeprefix("http://") for u in fixture_fleet.urls]
    down = f"127.0.0.1:{ps.free_port()}"
    llm = [addrs[0], addrs[1], addrs[2], addrs[3], down, addrs[5]]
    labels = [{"instance": "gpu-box-1:8000"}] + [{}] * 5
    jobs = [
        ps.Job("llm", llm, labels),
        ps.Job("dcgm", [addrs[4]]),
        ps.Job("node", [node.url.removeprefix("http://")]),
    ]
    p = ps.start_prometheus(jobs, work)
    try:
        ps.wait_targets_up(p.url, 7)
        # five scrapes of every target inside the window, however busy the machine: a
        # rate from a few samples is as coarse as one scrape more or less (J/token below
        # divides one target's increase by another's)
        ps.wait_scrapes(p.url, 5, WINDOW_S)
        yield p, [f"http://{a}" for a in llm]
    finally:
        p.stop()
        node.stop()


def test_every_target_becomes_a_row_in_a_fixed_number_of_requests(prom) -> None:
    p, urls = prom
    fleet = Fleet([], p.url, window_s=WINDOW_S)
    try:
        snap = fleet.refresh()
    finally:
        fleet.close()
    assert snap.prometheus_error is None and snap.queries == 28 and snap.scrapes == 0
    rows = {r.url: r for r in snap.rows}
    assert set(rows) == set(urls)  # not the DCGM exporter, node_exporter or Prometheus
    for i in range(3):
        r, want = rows[urls[i]], ff.expected_vllm(i)
        assert (r.kind, r.model, r.up, r.source) == ("vllm", "fixture-model", True, "prometheus")
        for key in ("ttft_p50_ms", "ttft_p90_ms", "itl_p50_ms", "prefix_cache_hit_pct"):
            assert getattr(r, key) == pytest.approx(want[key], rel=1e-6), key
        assert r.kv_cache_pct == pytest.approx(want["kv_cache_pct"])
        assert r.running == want["running"] and r.waiting == want["waiting"]
        # Prometheus's rate(): scraped once a second, at most one step a second
        assert 0 < r.gen_tps <= 1.3 * want["gen_per_scrape"]
        assert r.window_s == WINDOW_S
    assert rows[urls[0]].name == "gpu-box-1:8000" and rows[urls[0]].host == "gpu-box-1"
    # a data-parallel vLLM (series per engine label): PromQL averages KV %, sums the rest
    two, one, want = rows[urls[5]], rows[urls[1]], ff.expected_vllm(1)  # fixture 1's totals
    assert two.kind == "vllm" and two.up
    assert two.kv_cache_pct == pytest.approx(want["kv_cache_pct"])
    assert (two.running, two.waiting) == (want["running"], want["waiting"]) == (3.0, 1.0)
    for key in ("ttft_p50_ms", "ttft_p90_ms", "itl_p50_ms", "prefix_cache_hit_pct"):
        assert getattr(two, key) == pytest.approx(want[key], rel=1e-6), key
    assert two.itl_mean_ms == pytest.approx(one.itl_mean_ms, rel=1e-6)
    # both engines' tokens: the same rate as fixture 1 alone (one engine's would be 2/3 or
    # 1/3 of it, their mean 1/2), within the jitter of two targets' scrape times. Each
    # counter steps once per scrape served, so a scrape Prometheus gave up on (the
    # machine busy) puts two steps in one interval: a loaded run saw 1.22× here. The mean
    # (1/2) and engine 1 alone (1/3) fail this; engine 0 alone (2/3) only while the
    # jitter stays under 1.2× (the single targets' bounds above check each rate too)
    assert 0.8 <= two.gen_tps / one.gen_tps <= 1.5, (two.gen_tps, one.gen_tps)
    llama = rows[urls[3]]
    assert llama.kind == "llama-server" and llama.up and llama.gen_tps > 0
    assert llama.prefix_cache_hit_pct == pytest.approx(100 * 30 / 130, rel=1e-6)
    assert llama.itl_mean_ms == pytest.approx(12.0, rel=1e-6)
    assert llama.model is None and llama.kv_cache_pct is None  # not in its series
    gone = rows[urls[4]]
    assert not gone.up and gone.kind is None and "connection refused" in gone.error
    # GPUs: by DCGM's Hostname label for gpu-box-1, by the exporter's instance host for
    # the rows on 127.0.0.1; host CPU / RAM from node_exporter on 127.0.0.1 only
    for url in urls:
        gpus = rows[url].gpus
        assert gpus is not None and [g.gpu for g in gpus] == ["0", "1"], url
        assert gpus[1].mem_used_mib == 21000 and gpus[1].mem_total_mib == ff.FB_TOTAL_MIB
        assert gpus[0].power_w == 300.5 and gpus[0].model == ff.GPU_MODEL
    assert rows[urls[1]].host_cpu_pct is not None and 0 < rows[urls[1]].host_mem_pct < 100
    assert rows[urls[0]].host_cpu_pct is None
    # J/token from DCGM's energy counter, computed by Prometheus's increase() over the
    # window: ENERGY_PER_SCRAPE_J per GPU per one-second scrape, two GPUs on the host
    for i in range(3):
        r = rows[urls[i]]
        assert all(g.energy_j and g.energy_j > 0 for g in r.gpus)
        assert r.j_per_token == pytest.approx(r.gpu_energy_j / (r.gen_tps * WINDOW_S))
        per_token = 2 * ff.ENERGY_PER_SCRAPE_J / ff.expected_vllm(i)["gen_per_scrape"]
        assert r.j_per_token == pytest.approx(per_token, rel=0.35)


def test_a_configured_endpoint_prometheus_scrapes_is_not_scraped_again(prom, fixture_fleet) -> None:
    p, urls = prom
    scrapes = fixture_fleet.endpoints[1].scrapes
    direct_only = f"http://127.0.0.1:{ps.free_port()}"
    fleet = Fleet(fleet_endpoints([urls[1], direct_only], {}), p.url, window_s=WINDOW_S)
    try:
        snap = fleet.refresh()
    finally:
        fleet.close()
    named = {r.name: r for r in snap.rows}
    configured = named[urls[1].removeprefix("http://")]
    assert configured.source == "prometheus" and configured.up
    assert fixture_fleet.endpoints[1].scrapes - scrapes <= 2  # Prometheus's own, not ours
    assert snap.scrapes == 1 and not named[direct_only.removeprefix("http://")].up
    assert len(snap.rows) == len(urls) + 1


def test_cli_reads_prometheus_once(prom, infertop_cmd, cli_env) -> None:
    p, urls = prom
    proc = subprocess.run(
        [*infertop_cmd, "fleet", "--prometheus", p.url, "--once", "--json", "--window", "10"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["prometheus"] == {"url": p.url, "error": None}
    kinds = sorted(str(r["kind"]) for r in out["endpoints"])
    assert kinds == ["None", "llama-server", "vllm", "vllm", "vllm", "vllm"]
    assert all(r["gpus"] for r in out["endpoints"])


def test_prometheus_down_is_said_and_direct_rows_go_on(fixture_fleet) -> None:
    fleet = Fleet(fleet_endpoints(fixture_fleet.urls[:1], {}), f"http://127.0.0.1:{ps.free_port()}")
    try:
        snap = fleet.refresh()
    finally:
        fleet.close()
    assert snap.prometheus_error and "connection refused" in snap.prometheus_error
    assert len(snap.rows) == 1 and snap.rows[0].up and snap.rows[0].gpus is None
