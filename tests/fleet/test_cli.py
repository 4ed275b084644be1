"""``infertop fleet --once`` as a user runs it (a subprocess) against fixture endpoints."""

from __future__ import annotations

import json
import subprocess

from prometheus_server import free_port

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
