"""`infertop bench` as a user runs it: real subprocesses, bad input, failures, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# Runs the real CLI entry point with the pace engine kind registered first (config
# validation only accepts registered kinds).
PACE_MAIN = (
    "import sys; "
    "from tui.engines.registry import register; "
    "from tests.bench import pace_engine; "
    "register('pace', 'tests.bench.pace_engine:PaceEngine', '', pace_engine.OPTIONS); "
    "from tui.__main__ import main; sys.exit(main(sys.argv[1:]))"
)


def bench(cmd, env, *args, timeout=120):
    return subprocess.run(
        [*cmd, "bench", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def pace_bench(env, cfg, *args, timeout=120):
    """`infertop bench --config cfg ARGS` with the pace engine registered (PACE_MAIN)."""
    return bench(
        [sys.executable, "-c", PACE_MAIN], env, "--config", str(cfg), *args, timeout=timeout
    )


def one_line_error(proc, text):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert any(text in ln for ln in lines), proc.stderr
    assert len(lines) == 1, proc.stderr


def test_unknown_engine(infertop_cmd, cli_env, tmp_path):
    p = bench(infertop_cmd, cli_env, "--engine", "nope", "--out", str(tmp_path / "o"))
    one_line_error(p, "unknown engine 'nope'")
    assert not (tmp_path / "o" / "report.json").exists()


def test_runs_zero(infertop_cmd, cli_env, tmp_path):
    one_line_error(
        bench(infertop_cmd, cli_env, "--runs", "0", "--out", str(tmp_path)),
        "--runs must be at least 1",
    )


def test_bad_concurrency_list(infertop_cmd, cli_env, tmp_path):
    one_line_error(
        bench(infertop_cmd, cli_env, "--concurrency", "1,eight", "--out", str(tmp_path)),
        "does not parse",
    )


def test_unknown_preset(infertop_cmd, cli_env, tmp_path):
    one_line_error(
        bench(infertop_cmd, cli_env, "--preset", "blog", "--out", str(tmp_path)),
        "unknown preset 'blog'",
    )


def test_unwritable_out_dir(infertop_cmd, cli_env, tmp_path):
    (tmp_path / "f").write_text("x")
    one_line_error(
        bench(infertop_cmd, cli_env, "--out", str(tmp_path / "f" / "o")), "cannot write there"
    )


def test_out_is_required(infertop_cmd, cli_env):
    p = bench(infertop_cmd, cli_env)
    assert p.returncode == 2 and "--out" in p.stderr and "Traceback" not in p.stderr


def _pace_config(tmp_path, **options) -> Path:
    opts = ", ".join(f"{k} = {json.dumps(v)}" for k, v in options.items())
    cfg = tmp_path / "infertop.toml"
    cfg.write_text(f'default_engine = "p"\n[engines.p]\nkind = "pace"\noptions = {{ {opts} }}\n')
    return cfg


def test_always_failing_engine_exits_nonzero_with_summary(cli_env, tmp_path):
    cfg = _pace_config(tmp_path, fail="always")
    out = tmp_path / "o"
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            PACE_MAIN,
            "--config",
            str(cfg),
            "bench",
            "--runs",
            "2",
            "--max-tokens",
            "4",
            "--prompt-tokens",
            "20",
            "--out",
            str(out),
        ],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 3, p.stdout + p.stderr
    assert "p: 0 ok, 2 failed" in p.stdout
    assert "every request failed; first error: pace engine: told to fail" in p.stdout
    report = json.loads((out / "report.json").read_text())
    e = report["summary"]["engines"][0]
    assert e["failed"] == 2 and len(e["failures"]) == 2
    assert "## Failed requests" in (out / "report.md").read_text()


def test_pace_bench_through_cli_with_preset_overrides(cli_env, tmp_path):
    cfg = _pace_config(tmp_path, token_ms=2.0, ttft_ms=5.0)
    out = tmp_path / "o"
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            PACE_MAIN,
            "bench",
            "--config",
            str(cfg),
            "--preset",
            "seed-post",
            "--runs",
            "3",
            "--max-tokens",
            "6",
            "--concurrency",
            "1,2",
            "--slo",
            "ttft_ms=1000",
            "--rate",
            "50",
            "--out",
            str(out),
        ],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    plan = json.loads((out / "report.json").read_text())["plan"]
    # explicit flags win over the preset; the rest comes from the preset
    assert (plan["runs"], plan["max_tokens"], plan["concurrency"]) == (3, 6, [1, 2])
    assert (plan["preset"], plan["n_ctx"], plan["temperature"]) == ("seed-post", 2048, 0.7)
    assert plan["slo"] == {"ttft_ms": 1000.0} and plan["rate"] == 50.0
    levels = json.loads((out / "report.json").read_text())["summary"]["engines"][0]["levels"]
    assert [lv["label"] for lv in levels] == ["c=1", "c=2", "rate=50"]
    assert all(lv["goodput"]["good"] == lv["ok"] == lv["requests"] for lv in levels)


def _finished_warm(report: Path) -> bool:
    """The checkpoint at ``report`` has a measured request that answered."""
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):  # not written yet, or caught mid-write
        return False
    records = data["engines"][0]["records"] if data.get("engines") else []
    return any(r["phase"] == "warm" and r["status"] == "ok" for r in records)


@pytest.mark.engine
def test_ctrl_c_mid_run_writes_a_partial_report(infertop_cmd, cli_env, tmp_path, one_thread_config):
    """SIGINT to a real `python -m tui bench` on the real in-process llama.cpp engine."""
    out = tmp_path / "o"
    cli_env["INFERTOP_BENCH_CHECKPOINT_S"] = "0"
    proc = subprocess.Popen(
        [
            *infertop_cmd,
            "bench",
            "--config",
            str(one_thread_config),
            "--runs",
            "50",
            "--warmup",
            "0",
            "--max-tokens",
            "32",
            "--prompt-tokens",
            "32",
            "--out",
            str(out),
        ],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # a checkpoint after every request (INFERTOP_BENCH_CHECKPOINT_S=0): wait until one
        # says a measured request finished, not for as long as that ought to take
        deadline = time.monotonic() + 240
        while not _finished_warm(out / "report.json") and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr
    assert "PARTIAL REPORT (interrupted (Ctrl-C))" in stdout
    report = json.loads((out / "report.json").read_text())
    assert report["partial"] is True and report["partial_reason"] == "interrupted (Ctrl-C)"
    warm = [r for r in report["engines"][0]["records"] if r["phase"] == "warm"]
    assert 1 <= len(warm) < 50
    assert any(r["status"] == "ok" for r in warm)
    assert "**PARTIAL REPORT**" in (out / "report.md").read_text()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_bench_exports_every_request_it_sends(cli_env, tmp_path):
    """--otlp: each request the bench sends (warm-up and calibration too) is a span at the
    receiver, with the trace id the report's record has."""
    pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs it")
    from tests.support.otlp_sink import OtlpSink

    sink = OtlpSink()
    try:
        cfg = _pace_config(tmp_path, token_ms=1.0, ttft_ms=5.0)
        out = tmp_path / "o"
        p = pace_bench(
            cli_env, cfg, "--runs", "3", "--max-tokens", "4", "--prompt-tokens", "20",
            "--out", str(out), "--otlp", sink.url,
        )  # fmt: skip
        assert p.returncode == 0, p.stdout + p.stderr
    finally:
        sink.stop()
    report = json.loads((out / "report.json").read_text())
    records = report["engines"][0]["records"]
    traces = {r["trace_id"] for r in records}
    assert None not in traces and len(sink.spans) == len(records) >= 3
    assert {s["trace_id"] for s in sink.spans} == traces
    assert {s["attributes"]["infertop.source"] for s in sink.spans} == {"bench"}
