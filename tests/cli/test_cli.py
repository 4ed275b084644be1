"""The headless CLI: `infertop run`, `infertop doctor`, and every bad input.

Each bad input must give one clear line on stderr, a non-zero exit and no traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.support.sched import kernel_keeps_slices

pytestmark = pytest.mark.engine


def run(cmd, env, *args, timeout=180):
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=timeout)


def assert_clean_error(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines, "no error message"
    last = lines[-1]
    for needle in needles:
        assert needle in last, last


def test_help(infertop_cmd, cli_env):
    proc = run(infertop_cmd, cli_env, "--help")
    assert proc.returncode == 0
    for word in ("run", "doctor"):
        assert word in proc.stdout


def test_run_json_has_every_field(infertop_cmd, cli_env):
    proc = run(
        infertop_cmd,
        cli_env,
        "run",
        "--prompt",
        "Say hello.",
        "--max-tokens",
        "12",
        "--temperature",
        "0",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in (
        "engine",
        "model",
        "text",
        "prompt_tokens",
        "output_tokens",
        "ttft_ms",
        "itl_ms_p50",
        "itl_ms_p90",
        "tpot_ms",
        "decode_tps",
        "prefill_tps",
        "prefill_tps_source",
        "e2e_ms",
        "load_ms",
        "engine_truth",
    ):
        assert key in out, key
    assert out["text"].strip()
    assert out["prefill_tps_source"] == "engine"
    assert 0 < out["output_tokens"] <= 12
    assert out["output_tokens"] == out["engine_truth"]["output_tokens"]
    assert 0 < out["ttft_ms"] < out["e2e_ms"]
    assert out["load_ms"] > 0
    assert out["engine_truth"]["prompt_tokens"] == out["prompt_tokens"]
    assert out["stamp_source"].startswith("llama.cpp's generation thread")
    # infertop's own CPU over the request: the engine ran in its worker process, not here
    own = out["own_cpu"]
    assert not own["engine_inside"] and 0 < own["wall_s"] * 1000 <= out["e2e_ms"] + 1000
    assert own["percent_of_a_core"] == 100 * own["cpu_s"] / own["wall_s"]


def test_run_streams_text_then_metrics(infertop_cmd, cli_env):
    proc = run(infertop_cmd, cli_env, "run", "--prompt", "Say hello.", "--max-tokens", "10")
    assert proc.returncode == 0, proc.stderr
    assert "TTFT" in proc.stdout and "decode" in proc.stdout and "(engine)" in proc.stdout
    assert "stamps: llama.cpp's generation thread" in proc.stdout
    assert "infertop's own CPU: " in proc.stdout
    assert "the engine's own process not included" in proc.stdout


def test_doctor_finds_the_default_engine(infertop_cmd, cli_env):
    proc = run(infertop_cmd, cli_env, "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "llama-cpp-python" in proc.stdout
    assert "SmolLM2" in proc.stdout
    assert "NVIDIA GPU" in proc.stdout  # found or "none (...)", never a crash
    assert "can run" in proc.stdout
    # what the engine was built for, and proof that it runs (in a child process)
    assert "CPU" in proc.stdout and "llama.cpp build" in proc.stdout
    assert "[ok] AMX instructions" in proc.stdout and "none (AMX off in the build)" in proc.stdout
    probe = [ln for ln in proc.stdout.splitlines() if "engine probe" in ln]
    assert probe and "ok, 1 token in" in probe[0], proc.stdout
    # infertop's own cost beside the engine's, and the threads the TUI leaves the engine
    assert "hardware sampler" in proc.stdout and "ms per sample" in proc.stdout
    cores = os.cpu_count() or 1
    ui = cores if cores <= 4 else cores - 1
    assert f"{ui} under the TUI, {cores} headless" in proc.stdout
    assert ("shared cores" in proc.stdout) == (cores <= 4)
    # the scheduler slice the proxy asks for: kept on Linux 6.12+, else why not
    (sched,) = [ln for ln in proc.stdout.splitlines() if "proxy slice" in ln]
    if kernel_keeps_slices():
        assert sched.startswith("[ok]") and "0.1 ms, asked for with sched_setattr" in sched
    else:
        assert "the kernel's default" in sched


@pytest.mark.parametrize("sig", ["SIGSEGV", "SIGKILL"])
def test_run_prints_the_partial_answer_when_the_engine_process_dies(infertop_cmd, cli_env, sig):
    """Kill the engine's worker process mid-answer: `infertop run` prints what streamed,
    its metrics and the error, and exits non-zero (no traceback)."""
    import os
    import select
    import signal
    import time

    import psutil

    proc = subprocess.Popen(
        [
            *infertop_cmd,
            "run",
            "--prompt",
            "Write a long story about a cat.",
            "--max-tokens",
            "400",
        ],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        got = b""
        deadline = time.monotonic() + 120
        while len(got.split()) < 8 and time.monotonic() < deadline:  # the answer is streaming
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                got += os.read(proc.stdout.fileno(), 4096)
        assert len(got.split()) >= 8, got
        workers = psutil.Process(proc.pid).children()
        assert len(workers) == 1, workers
        os.kill(workers[0].pid, getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    stdout = (got + out).decode()
    stderr = err.decode()
    assert proc.returncode == 1
    assert "Traceback" not in stderr, stderr
    answer, _, summary = stdout.partition("── local")
    assert len(answer.split()) >= 8  # the partial text, then its metrics
    assert "TTFT" in summary and "decode" in summary
    out_tokens = int(re.search(r"output (\d+)", summary).group(1))
    assert out_tokens >= 8
    assert f"engine process died: {sig}" in stderr.splitlines()[-1]


def test_doctor_says_why_with_a_broken_config(infertop_cmd, cli_env, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[ui]\ncolour = 1\n")
    proc = run(infertop_cmd, cli_env, "--config", str(bad), "doctor", "--no-load")
    assert proc.returncode == 1
    assert "ui.colour" in proc.stdout and str(bad) in proc.stdout


def test_missing_model_path(infertop_cmd, cli_env, tmp_path):
    proc = run(infertop_cmd, cli_env, "run", "--prompt", "hi", "--model", str(tmp_path / "x.gguf"))
    assert_clean_error(proc, "model file not found")


def test_corrupt_gguf(infertop_cmd, cli_env, tmp_path, model_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(model_path.read_bytes()[:3_000_000])
    proc = run(infertop_cmd, cli_env, "run", "--prompt", "hi", "--model", str(cut))
    assert_clean_error(proc, "could not load", "cut.gguf")


def test_not_a_gguf(infertop_cmd, cli_env, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_text("this is not a model at all, just some text")
    proc = run(infertop_cmd, cli_env, "run", "--prompt", "hi", "--model", str(junk))
    assert_clean_error(proc, "not a GGUF model")


def test_unknown_engine_name(infertop_cmd, cli_env):
    proc = run(infertop_cmd, cli_env, "run", "--prompt", "hi", "--engine", "nope")
    assert_clean_error(proc, "unknown engine 'nope'")


def test_empty_prompt(infertop_cmd, cli_env):
    proc = run(infertop_cmd, cli_env, "run", "--prompt", "  ")
    assert_clean_error(proc, "prompt is empty")


@pytest.mark.parametrize("n", ["0", "-3"])
def test_bad_max_tokens(infertop_cmd, cli_env, n):
    proc = run(infertop_cmd, cli_env, "run", "--prompt", "hi", f"--max-tokens={n}")
    assert_clean_error(proc, "max tokens must be at least 1")


@pytest.mark.parametrize(
    "text, needles",
    [
        (
            '[engines.local]\nkind = "llamacpp"\nmodle = "x"\n',
            ["engines.local.modle", "unknown key", ":3:"],
        ),
        ('[generation]\nmax_tokens = "many"\n', ["generation.max_tokens", "expected int", ":2:"]),
        ("[generation\nmax_tokens = 3\n", ["invalid TOML", "line 1"]),
    ],
    ids=["unknown-key", "wrong-type", "broken-toml"],
)
def test_bad_config(infertop_cmd, cli_env, tmp_path, text, needles):
    cfg = tmp_path / "infertop.toml"
    cfg.write_text(text)
    proc = run(infertop_cmd, cli_env, "--config", str(cfg), "run", "--prompt", "hi")
    assert_clean_error(proc, str(cfg), *needles)


def test_only_the_chosen_subcommand_is_built():
    """A subcommand's start-up builds (and imports) only its own options; a top-level
    option's value that happens to be a subcommand's name is not taken for one."""
    from tui.__main__ import SUBCOMMANDS, build_parser, chosen_command

    top = build_parser("ui")
    assert chosen_command(top, ["bench", "--runs", "2"]) == "bench"
    assert chosen_command(top, ["--config", "bench", "run", "--prompt", "x"]) == "run"
    assert chosen_command(top, ["--config=bench", "fleet"]) == "fleet"
    assert chosen_command(top, ["--telemetry", "ssh://box"]) is None
    assert chosen_command(top, ["--", "bench"]) is None
    args = build_parser("bench").parse_args(
        ["--config", "c.toml", "bench", "--runs", "3", "--out", "o"]
    )
    assert (args.command, args.runs, args.config) == ("bench", 3, "c.toml")
    with pytest.raises(SystemExit):  # run's options were not built for a bench start-up
        build_parser("bench").parse_args(["run", "--prompt", "x"])
    whole = build_parser()  # --help at the top: every subcommand with its help line
    helptext = whole.format_help()
    assert all(name in helptext for name in SUBCOMMANDS)
