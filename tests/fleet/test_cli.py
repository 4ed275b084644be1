"""``infertop fleet --once`` as a user runs it (a subprocess) against fixture endpoints."""

from __future__ import annotations

import json
import subprocess

from tests.support.prometheus_server import free_port

FIELDS = {
    "name",
    "url",
    "kind",
    "model",
    "up",
    "error",
    "running",
    "waiting",
    "kv_cache_pct",
    "prefix_cache_hit_pct",
    "gen_tps",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "gpus",
}


def _run(cmd, env, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run(
        [*cmd, "fleet", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_once_json_with_a_down_url(fixture_fleet, infertop_cmd, cli_env) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    u1, u2 = fixture_fleet.urls[0], fixture_fleet.urls[3]
    p = _run(
        infertop_cmd,
        cli_env,
        "--url",
        u1,
        "--url",
        u2,
        "--url",
        down,
        "--once",
        "--json",
        "--gap",
        "0.3",
    )
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["endpoints"]
    assert [r["url"] for r in rows] == [u1, u2, down]
    for r in rows:
        assert FIELDS <= set(r)
    vllm, llama, gone = rows
    assert vllm["kind"] == "vllm" and vllm["up"] and vllm["gen_tps"] > 0
    assert vllm["ttft_p50_ms"] is not None and vllm["kv_cache_pct"] == 5.0
    assert llama["kind"] == "llama-server" and llama["kv_cache_pct"] is None  # not reported
    assert llama["ttft_p50_ms"] is None and llama["gen_tps"] > 0
    assert gone["up"] is False and "connection refused" in gone["error"]
    assert all(gone[k] is None for k in FIELDS - {"name", "url", "up", "error"})


def test_once_text_table(fixture_fleet, infertop_cmd, cli_env) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    cli_env["COLUMNS"] = "80"
    p = _run(
        infertop_cmd,
        cli_env,
        "--url",
        fixture_fleet.urls[1],
        "--url",
        down,
        "--once",
        "--gap",
        "0.2",
    )
    assert p.returncode == 0, p.stderr
    table, _, errors = p.stdout.partition("\n\n")
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["endpoint", "state", "run"]
    assert all(len(line) <= 80 for line in lines) and len(lines) == 3
    assert " up " in lines[1] and " down " in lines[2]
    assert "down: connection refused by" in errors  # the error, in full


def test_bad_use_is_one_line(infertop_cmd, cli_env) -> None:
    p = _run(infertop_cmd, cli_env, "--once")
    assert p.returncode == 2 and p.stderr.startswith("infertop: error: no endpoints")
    p = _run(infertop_cmd, cli_env, "--url", "http://127.0.0.1:9", "--json")
    assert p.returncode == 2 and "--once" in p.stderr
    p = _run(infertop_cmd, cli_env, "--url", "http://x", "--interval", "0")
    assert p.returncode == 2 and "must be > 0" in p.stderr


def test_telemetry_source_gives_the_gpus_of_url_endpoints(
    fixture_fleet, infertop_cmd, cli_env, tmp_path
):
    """``--telemetry EXPORTER``: the endpoints given with --url take their GPUs from it (a
    DCGM page written from its documented names, served over HTTP); an engine's own
    ``telemetry`` in config wins; a bad source is one line."""
    from tests.support.exporter_fixtures import MetricsServer, dcgm_page, nvitop_page

    dcgm = MetricsServer(dcgm_page()).start()
    nvitop = MetricsServer(nvitop_page()).start()
    try:
        u_vllm, u_llama = fixture_fleet.urls[0], fixture_fleet.urls[3]
        cfg = tmp_path / "fleet.toml"
        cfg.write_text(
            f'default_engine = "own"\n[engines.own]\nkind = "llama-server"\nurl = "{u_llama}"\n'
            f'telemetry = "{nvitop.url}"\n'
        )
        env = dict(cli_env, INFERTOP_CONFIG=str(cfg))
        p = _run(
            infertop_cmd, env, "--url", u_vllm, "--url", u_llama,
            "--telemetry", dcgm.url, "--once", "--json", "--gap", "0.3",
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        vllm, llama = json.loads(p.stdout)["endpoints"]
        assert vllm["hardware"] == f"dcgm {dcgm.url}" and vllm["hardware_error"] is None
        g0, g1 = vllm["gpus"]
        assert (g0["util_pct"], g1["util_pct"]) == (97.0, 3.0)
        assert (
            g0["mem_used_mib"] == 72559 and g0["mem_total_mib"] == 72559 + 8000 + 530
        )  # + reserved
        assert g0["power_w"] == 612.25 and g0["model"] == "NVIDIA H100 80GB HBM3"
        assert llama["name"] == "own" and llama["hardware"] == f"nvitop {nvitop.url}"  # its own
        (g,) = llama["gpus"]
        assert g["util_pct"] == 64.0 and g["mem_used_mib"] == 20110 and g["power_w"] == 355.5
        assert llama["host_cpu_pct"] == 23.5
    finally:
        dcgm.stop()
        nvitop.stop()
    p = _run(infertop_cmd, cli_env, "--url", fixture_fleet.urls[0], "--telemetry", "gpu-box")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith("infertop: error: --telemetry:") and "expected" in p.stderr
