"""The fleet's numbers from known scrapes (no network): each column's definition, the
PromQL join, column fitting and sorting, config, the engine a row opens."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import fleet_fixture as ff
from tui.config import ConfigError, parse_config
from tui.engines.base import EngineSpec
from tui.fleet.columns import BY_KEY, detail_text, fit_columns, sort_rows, text_table
from tui.fleet.direct import fill_llamacpp, fill_vllm
from tui.fleet.poller import fleet_endpoints, spec_for_row
from tui.fleet.promql import build_rows, fleet_queries, host_names, instance_host
from tui.fleet.rows import EndpointRow, GpuRow
from tui.telemetry.servers.vllm_metrics import summarize
from tui.transport.prometheus import Scrape, parse


def test_vllm_row_from_two_scrapes_matches_the_definitions() -> None:
    p = ff.Profile("vllm", 2)
    row = EndpointRow("e", "http://h:1")
    fill_vllm(row, parse(ff.vllm_metrics(p, 4), t=10.0), parse(ff.vllm_metrics(p, 7), t=13.0))
    want = ff.expected_vllm(2)
    assert row.window_s == pytest.approx(3.0)
    assert row.gen_tps == pytest.approx(3 * want["gen_per_scrape"] / 3.0)
    for key in ("ttft_p50_ms", "ttft_p90_ms", "itl_p50_ms", "prefix_cache_hit_pct"):
        assert getattr(row, key) == pytest.approx(want[key]), key
    assert row.kv_cache_pct == pytest.approx(want["kv_cache_pct"])
    assert (row.running, row.waiting) == (want["running"], want["waiting"])
    assert row.itl_mean_ms == pytest.approx(0.7 / 40 * 1000)  # Δsum / Δcount
    assert row.model == "fixture-model"  # from the model_name label


def test_first_scrape_has_gauges_but_no_window() -> None:
    row = EndpointRow("e", "http://h:1")
    fill_vllm(row, None, parse(ff.vllm_metrics(ff.Profile("vllm", 1), 1), t=1.0))
    assert row.running == 3 and row.kv_cache_pct is not None
    assert row.gen_tps is None and row.ttft_p50_ms is None and row.window_s is None


def test_llama_server_row() -> None:
    p = ff.Profile("llama-server", 0)
    row = EndpointRow("e", "http://h:1")
    fill_llamacpp(
        row, parse(ff.llamacpp_metrics(p, 1), t=0.0), parse(ff.llamacpp_metrics(p, 3), t=4.0)
    )
    assert row.gen_tps == pytest.approx(2 * 40 / 4.0)
    assert row.prefix_cache_hit_pct == pytest.approx(100 * 30 / 130)  # cached / (cached + fresh)
    assert row.itl_mean_ms == pytest.approx(12.0)
    assert row.kv_cache_pct is None and row.ttft_p50_ms is None  # not reported: not invented


def test_restarted_server_gives_no_negative_rate() -> None:
    p = ff.Profile("vllm", 0)
    row = EndpointRow("e", "http://h:1")
    fill_vllm(row, parse(ff.vllm_metrics(p, 9), t=0.0), parse(ff.vllm_metrics(p, 1), t=1.0))
    assert row.gen_tps is None and row.prefix_cache_hit_pct is None


def test_a_data_parallel_vllm_averages_kv_and_sums_the_rest() -> None:
    """vLLM with two engines (``--data-parallel-size 2``) labels every series by engine:
    KV % is each engine's share of its own cache, so the row shows their mean; requests
    running and waiting, token rates and histogram observations add up."""
    p = ff.Profile("vllm", 1, engines=2)
    prev, cur = parse(ff.vllm_metrics(p, 4), t=10.0), parse(ff.vllm_metrics(p, 7), t=13.0)
    per_engine = cur.samples["vllm:kv_cache_usage_perc"]
    assert len(per_engine) == 2 and len(set(per_engine.values())) == 2  # two, and unequal
    running = sorted(cur.samples["vllm:num_requests_running"].values())
    assert running == [1.0, 2.0]  # neither engine alone has the total
    row = EndpointRow("e", "http://h:1")
    fill_vllm(row, prev, cur)
    want = ff.expected_vllm(1)
    assert row.kv_cache_pct == pytest.approx(want["kv_cache_pct"])
    assert row.kv_cache_pct == pytest.approx(50 * sum(per_engine.values()))  # the mean
    assert (row.running, row.waiting) == (want["running"], want["waiting"]) == (3.0, 1.0)
    assert row.gen_tps == pytest.approx(3 * want["gen_per_scrape"] / 3.0)  # both engines'
    for key in ("ttft_p50_ms", "ttft_p90_ms", "itl_p50_ms", "prefix_cache_hit_pct"):
        assert getattr(row, key) == pytest.approx(want[key]), key  # buckets summed
    assert row.itl_mean_ms == pytest.approx(0.7 / 40 * 1000)
    # the server panel reads the same page the same way (tui/telemetry/servers/vllm_metrics.py)
    s = summarize(prev, cur)
    assert s.kv_cache_usage == pytest.approx(want["kv_cache_pct"] / 100)
    assert (s.running, s.waiting) == (3.0, 1.0)
    assert s.generation_tps == pytest.approx(want["gen_per_scrape"])
    assert s.percentiles_ms("ttft")["p50"] == pytest.approx(want["ttft_p50_ms"])


def test_a_hosts_gpus_add_up_except_utilisation_which_is_their_mean() -> None:
    """The row's GPU columns over its host's GPUs (tui/fleet/rows.py): utilisation is the
    mean of the GPUs that report it, memory and power are sums."""
    gpus = [
        GpuRow("h", "0", util_pct=10.0, mem_used_mib=1000.0, mem_free_mib=3000.0, power_w=100.0),
        GpuRow("h", "1", util_pct=30.0, mem_used_mib=2000.0, mem_free_mib=2000.0, power_w=50.0),
        GpuRow("h", "2", mem_used_mib=500.0, mem_free_mib=3500.0),  # no util, no power
    ]
    row = EndpointRow("e", "http://h:1", gpus=gpus)
    assert row.gpu_util_pct == 20.0
    assert (row.gpu_mem_used_mib, row.gpu_mem_total_mib) == (3500.0, 12000.0)
    assert row.gpu_power_w == 150.0


def _grow(scrape: Scrape, name: str, by: float, t: float) -> Scrape:
    """``scrape`` read again ``t`` later with counter ``name`` grown by ``by`` (only)."""
    samples = {k: dict(v) for k, v in scrape.samples.items()}
    samples[name] = {labels: v + by for labels, v in samples[name].items()}
    return Scrape(samples, scrape.t + t)


def test_an_idle_window_is_zero_not_unknown() -> None:
    """Counters that did not move over a window are a rate of 0 and, where prefix-cache
    queries happened without a hit, 0 % hits: numbers, shown as 0, never "–"."""
    prev = parse(ff.vllm_metrics(ff.Profile("vllm", 2), 5), t=20.0)
    row = EndpointRow("e", "http://h:1", kind="vllm", up=True)
    fill_vllm(row, prev, _grow(prev, "vllm:prefix_cache_queries_total", 100, 2.0))
    assert row.window_s == pytest.approx(2.0)
    assert row.gen_tps == 0.0 and row.prefix_cache_hit_pct == 0.0
    assert (BY_KEY["gen_tps"].text(row), BY_KEY["prefix_cache_hit_pct"].text(row)) == ("0.0", "0")
    # nothing asked at all: no hit ratio exists (that one is "–"); the rate is still 0
    fill_vllm(row, prev, _grow(prev, "vllm:prefix_cache_queries_total", 0, 2.0))
    assert row.gen_tps == 0.0 and row.prefix_cache_hit_pct is None
    # llama-server: fresh prompt tokens, none from the cache, none generated
    p = ff.Profile("llama-server", 0)
    prev = parse(ff.llamacpp_metrics(p, 2), t=0.0)
    row = EndpointRow("l", "http://h:2", kind="llama-server", up=True)
    fill_llamacpp(row, prev, _grow(prev, "llamacpp:prompt_tokens_total", 64, 1.0))
    assert row.gen_tps == 0.0 and row.prefix_cache_hit_pct == 0.0
    assert row.itl_mean_ms is None  # no token generated: no gap to average
    # the server panel's reading of an idle vLLM: 0 tok/s both ways
    v = parse(ff.vllm_metrics(ff.Profile("vllm", 2), 5), t=0.0)
    s = summarize(v, _grow(v, "vllm:prefix_cache_queries_total", 0, 1.0))
    assert s.generation_tps == 0.0 and s.prompt_tps == 0.0


def _answers(*samples: tuple[str, str, dict[str, str]]) -> dict[str, list[dict]]:
    """Query results by column, as Prometheus answers each column's query."""
    out: dict[str, list[dict]] = {}
    for col, value, labels in samples:
        out.setdefault(col, []).append({"metric": labels, "value": [0, value]})
    return out


def test_prometheus_rows_kinds_and_host_join() -> None:
    targets = [
        {
            "labels": {"job": "llm", "instance": "gpu7.example.com:8000"},
            "health": "up",
            "scrapeUrl": "http://10.1.1.7:8000/metrics",
            "lastError": "",
        },
        {
            "labels": {"job": "llm", "instance": "10.1.1.8:8000"},
            "health": "down",
            "scrapeUrl": "http://10.1.1.8:8000/metrics",
            "lastError": "connection refused",
        },
        {
            "labels": {"job": "dcgm", "instance": "10.1.1.7:9400"},
            "health": "up",
            "scrapeUrl": "http://10.1.1.7:9400/metrics",
            "lastError": "",
        },
        {
            "labels": {"job": "other", "instance": "x:1"},
            "health": "down",
            "scrapeUrl": "http://x:1/metrics",
            "lastError": "boom",
        },
    ]
    llm = {"job": "llm", "instance": "gpu7.example.com:8000"}
    gpu = {
        "job": "dcgm",
        "instance": "10.1.1.7:9400",
        "gpu": "0",
        "UUID": "GPU-a",
        "modelName": "H100",
        "Hostname": "gpu7",
    }
    result = _answers(
        ("kind_vllm", "1", {**llm, "model_name": "Qwen"}),
        ("running", "3", llm),
        ("kv", "0.25", llm),
        ("prefix", "NaN", llm),  # 0/0: nothing looked up in the window
        ("ttft_p50", "0.125", llm),
        ("gpu_util_pct", "55", gpu),
        ("gpu_mem_used_mib", "1024", gpu),
        ("gpu_mem_free_mib", "3072", gpu),
    )
    got = build_rows(targets, result, 30.0)
    assert set(got.rows) == {"10.1.1.7:8000", "10.1.1.8:8000"}  # keyed by scrape address
    row = got.rows["10.1.1.7:8000"]
    assert (row.kind, row.model, row.up, row.url) == ("vllm", "Qwen", True, "http://10.1.1.7:8000")
    assert row.running == 3 and row.kv_cache_pct == 25 and row.ttft_p50_ms == 125
    assert row.prefix_cache_hit_pct is None and row.waiting is None
    down = got.rows["10.1.1.8:8000"]  # its job has endpoints: listed, kind unknown
    assert not down.up and down.kind is None and "connection refused" in down.error
    # the GPU's Hostname "gpu7" matches the endpoint's host gpu7.example.com (first label)
    gpus = got.gpus_for(row.host)
    assert gpus is not None and gpus[0].util_pct == 55 and gpus[0].mem_total_mib == 4096
    assert got.gpus_for("10.1.1.7") == gpus  # and its own instance host
    assert got.gpus_for("10.9.9.9") is None


def test_j_per_token_from_dcgm_energy_counters() -> None:
    """Σ the host's GPUs' energy over the window ÷ the endpoint's tokens in it."""
    targets = [
        {
            "labels": {"job": "llm", "instance": "gpu7:8000"},
            "health": "up",
            "scrapeUrl": "http://gpu7:8000/metrics",
        }
    ]
    llm = {"job": "llm", "instance": "gpu7:8000"}
    gpu = {"job": "dcgm", "instance": "gpu7:9400", "Hostname": "gpu7"}
    result = _answers(
        ("kind_vllm", "1", llm),
        ("gen_tps", "200", llm),
        ("gpu_energy_j", "9000", {**gpu, "gpu": "0"}),
        ("gpu_energy_j", "3000", {**gpu, "gpu": "1"}),
        ("gpu_power_w", "300", {**gpu, "gpu": "0"}),
        ("gpu_power_w", "100", {**gpu, "gpu": "1"}),
    )
    got = build_rows(targets, result, 30.0)
    row = got.rows["gpu7:8000"]
    row.gpus = got.gpus_for(row.host)
    assert row.gpu_energy_j == 12000.0
    assert row.j_per_token == pytest.approx(12000.0 / (200 * 30))  # = 2 J/token
    assert row.to_json()["j_per_token"] == 2.0
    assert "2 J/token (GPU energy counter 12000 J over the window, whole host)" in detail_text(row)
    row.gpus[1].energy_j = None  # one GPU without the counter: no figure, not a partial one
    assert row.j_per_token is None
    row.gpus = []
    assert row.j_per_token is None


def test_host_names() -> None:
    assert instance_host("[::1]:9100") == "::1"
    assert instance_host("Node-1.Example.com:80") == "node-1.example.com"
    assert host_names("node-1.example.com") == ["node-1.example.com", "node-1"]
    assert host_names("10.0.0.1") == ["10.0.0.1"]


def test_one_query_per_column_whatever_the_fleet_size() -> None:
    queries = fleet_queries(30, 300)
    # top_clients (a proxy's busiest clients), preemptions/min and draft acceptance (issue 52)
    assert len(queries) == 27
    assert queries["gpu_energy_j"] == "increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[30s]) / 1000"
    assert "[30s]" in queries["gen_tps"] and "[300s]" in queries["kind_vllm"]
    assert queries["gpu_mem_used_mib"] == "DCGM_FI_DEV_FB_USED"
    assert 'mode="idle"' in queries["host_cpu_pct"]


def test_columns_fit_the_width() -> None:
    for width in (60, 78, 120, 198):
        cols = fit_columns(width)
        assert sum(w + 2 for _, w in cols) <= width
    narrow = [c.key for c, _ in fit_columns(78)]
    assert narrow[:2] == ["name", "state"] and "gen_tps" in narrow and "ttft_p50_ms" in narrow
    assert len(fit_columns(198)) > len(narrow)
    assert "gpu_util" in [c.key for c, _ in fit_columns(198)]


def test_sort_puts_missing_values_last_both_ways() -> None:
    rows = ff.fixed_rows()
    for reverse in (False, True):
        got = sort_rows(rows, "ttft_p50_ms", reverse)
        values = [r.ttft_p50_ms for r in got]
        known = [v for v in values if v is not None]
        assert known == sorted(known, reverse=reverse)
        assert values[len(known) :] == [None] * (len(values) - len(known))
    assert [r.up for r in sort_rows(rows, "state")][-1] is False


def test_text_table_fits() -> None:
    text = text_table(ff.fixed_rows(), 80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "gpu1-vllm0" in text and "down" in text


def test_config_fleet_table(tmp_path: Path) -> None:
    cfg = parse_config(
        '[fleet]\nurls = ["http://a:8000", "http://b:8000"]\nprometheus = "http://p:9090"\n'
        "interval_s = 5\nwindow_s = 120\n",
        tmp_path / "c.toml",
    )
    assert cfg.fleet.urls == ["http://a:8000", "http://b:8000"]
    assert (cfg.fleet.prometheus, cfg.fleet.interval_s, cfg.fleet.window_s) == (
        "http://p:9090",
        5.0,
        120.0,
    )
    for bad, why in (
        ('urls = "http://a"', "expected list"),
        ('urls = ["ftp://a"]', "item 1: not an http(s) URL"),
        ("urls = [1]", "item 1: expected str"),
        ('prometheus = "p:9090"', "not an http(s) URL"),
        ("interval_s = 0", "must be > 0"),
        ("window_s = 0.5", "must be >= 1"),
        ("refresh = 1", "unknown key"),
    ):
        with pytest.raises(ConfigError, match=re.escape(why)) as e:
            parse_config(f"[fleet]\n{bad}\n", tmp_path / "c.toml")
        assert "c.toml:2: key 'fleet." in str(e.value)


def test_endpoints_from_urls_and_engines() -> None:
    engines = {
        "box": EngineSpec("box", "vllm", url="http://10.0.0.5:8000/v1", api_key_env="K"),
        "local": EngineSpec("local", "llamacpp", model="default"),
    }
    # no urls: every engine with a url
    assert [s.name for s in fleet_endpoints([], engines)] == ["box"]
    got = fleet_endpoints(
        ["http://10.0.0.5:8000", "http://u:p@10.0.0.6:8000/", "http://10.0.0.6:8000"], engines
    )
    assert [s.name for s in got] == ["box", "10.0.0.6:8000"]  # a configured URL keeps its engine
    assert got[1].kind == "?" and got[1].headers["Authorization"].startswith("Basic ")
    assert "p@" not in str(got[1].url)


def test_spec_for_a_prometheus_row() -> None:
    row = EndpointRow("node-3:8000", "http://10.0.0.3:8000", kind="vllm", model="Qwen", up=True)
    spec = spec_for_row(row)
    assert (spec.name, spec.kind, spec.url, spec.model) == ("node-3:8000", "vllm", row.url, "Qwen")
    row.kind = None
    assert spec_for_row(row).kind == "openai"


def test_json_reports_null_never_invented() -> None:
    rows = ff.fixed_rows()
    llama = next(r for r in rows if r.kind == "llama-server").to_json()
    assert llama["kv_cache_pct"] is None and llama["ttft_p50_ms"] is None and llama["gpus"] is None
    down = next(r for r in rows if not r.up).to_json()
    assert down["gen_tps"] is None and down["error"].startswith("connection refused")
    vllm = rows[0].to_json()
    assert vllm["gpus"][0]["mem_total_mib"] == ff.FB_TOTAL_MIB and vllm["gen_tps"] == 50.0


def test_a_lost_hardware_link_keeps_the_last_gpus_and_says_why() -> None:
    from tui.fleet.hardware import FleetHardware
    from tui.fleet.rows import EndpointRow
    from tui.telemetry.devices.nvml import GpuSample, NvmlSample
    from tui.telemetry.sampler import TelemetrySample
    from tui.telemetry.system import SystemSample

    gpu = GpuSample(0, "H200", util_percent=55.0, mem_used=2 << 30, mem_total=8 << 30)
    lost = "remote telemetry lost: Connection refused — retrying in 4 s"
    reading = TelemetrySample(
        1.0, SystemSample(12.5, ram_used=1, ram_total=4), NvmlSample("ok", gpus=[gpu]),
        source="box via ssh", link=lost,
    )  # fmt: skip

    class Source:  # what a RemoteLink gives while its link is down: the last reading
        label = "box via ssh"
        started = closed = 0

        def start(self) -> None:
            self.started += 1

        def sample(self, pid: int | None) -> TelemetrySample:
            return reading

        def close(self) -> None:
            self.closed += 1

    src = Source()
    hw = FleetHardware(None, 1.0, opener=lambda name, interval: src)
    rows = [EndpointRow("a", "http://a"), EndpointRow("b", "http://b")]
    for r in rows:
        hw.fill(r, "ssh://box")
    hw.close()
    assert src.started == 1 and src.closed == 1  # one link per source, not per row
    for r in rows:
        assert r.hardware == "box via ssh" and r.hardware_error == lost
        assert r.gpu_util_pct == 55.0 and r.gpu_mem_used_mib == 2048.0
        assert r.gpu_mem_total_mib == 8192.0 and r.host_cpu_pct == 12.5 and r.host_mem_pct == 25


def test_model_column_shows_a_path_by_its_file_name() -> None:
    from tui.core.table import model_text

    assert model_text("/srv/models/SmolLM2-135M-Instruct.Q4_1.gguf") == (
        "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    assert model_text("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"  # an HF id
    assert model_text(None) == "–"
