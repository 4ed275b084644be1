"""--depth: parsing, the n_ctx refusal before anything runs, and the CLI end to end
against the pace server (known speed; a usage-counting OpenAI server)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tui.bench.run.depth import check_fits, context_text, parse_depths, with_context
from tui.bench.run.plan import BenchError, BenchPlan
from tui.engines.base import GenerationRequest


def test_parse_depths():
    assert parse_depths("4096, 0,1024,1024") == [0, 1024, 4096]
    for bad in ("", "1,,2", "-5", "1k", "0.5"):
        with pytest.raises(BenchError, match="--depth .* does not parse"):
            parse_depths(bad)


def test_check_fits_names_n_ctx_and_the_deepest_that_fits():
    check_fits([0, 1792], 128, 128, 2048, "local")  # exactly full: fits
    with pytest.raises(BenchError) as e:
        check_fits([0, 1793], 128, 128, 2048, "local")
    msg = str(e.value)
    assert "n_ctx 2048" in msg and "--depth 1793" in msg and "local" in msg
    assert "1793 + 128 + 128 = 2049 > 2048" in msg and "deepest that fits is 1792" in msg
    with pytest.raises(BenchError, match="no depth fits"):
        check_fits([0], 2000, 100, 2048, "x")


def test_a_presets_n_ctx_refuses_in_the_plan():
    plan = BenchPlan(engines=["e"], n_ctx=2048, depths=[0, 4096])
    with pytest.raises(BenchError, match="n_ctx 2048"):
        plan.validate()


def test_depth_0_is_not_asked_twice_when_c1_is_measured():
    plan = BenchPlan(engines=["e"], runs=3, warmup=0, concurrency=[1, 2], depths=[0, 64])
    assert plan.requests_per_engine() == 3 + 6 + 3  # c=1, c=2, depth=64
    plan.concurrency = [2]
    assert plan.requests_per_engine() == 6 + 3 + 3  # depth 0 needs its own level


def test_context_turns_are_distinct_and_before_the_question():
    req = with_context(GenerationRequest.from_prompt("x"), context_text(7, 5), "the question")
    roles = [m["role"] for m in req.messages]
    assert roles == ["user", "assistant", "user"]
    assert req.messages[0]["content"].startswith("Context 000007. ")
    assert len(req.messages[0]["content"].split()) == 2 + 5 + 5  # number, preamble, words
    assert req.messages[-1]["content"] == "the question"
    assert context_text(8, 5) != context_text(7, 5)


def test_cli_refuses_a_depth_beyond_the_in_process_context(infertop_cmd, cli_env, tmp_path):
    """The default engine is in-process llama.cpp with n_ctx 2048: refused before the
    model loads, with the engine's n_ctx in the one-line error."""
    out = tmp_path / "o"
    p = subprocess.run(
        [*infertop_cmd, "bench", "--depth", "0,4096", "--out", str(out)],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("infertop bench: error: --depth 4096 does not fit")
    assert "(n_ctx 2048)" in last and "Traceback" not in p.stderr
    assert not out.exists()  # nothing was run or written


def test_cli_depth_and_alpha_against_the_pace_server(
    pace_server_url, infertop_cmd, cli_env, tmp_path
):
    url = pace_server_url(interval_ms=5.0, ttft_ms=10.0, concurrency=4)
    out = tmp_path / "o"
    p = subprocess.run(
        [
            *infertop_cmd,
            "bench",
            "--url",
            url,
            "--runs",
            "3",
            "--warmup",
            "0",
            "--max-tokens",
            "6",
            "--prompt-tokens",
            "30",
            "--concurrency",
            "1,2,4",
            "--depth",
            "0,40",
            "--out",
            str(out),
        ],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "depth 40 (counted 40): decode" in p.stdout and "batching model α = " in p.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["plan"]["depths"] == [0, 40]
    e = report["summary"]["engines"][0]
    assert [d["depth"] for d in e["depth"]] == [0, 40]
    assert e["depth"][1]["counted_depth"] == 40  # the pace server counts words exactly
    assert e["depth"][1]["prompt_tokens_median"] == 70
    # the pace server runs 4 requests at once at a fixed pace: near-perfect scaling (α
    # about 0.6 on a quiet machine; well above a serial engine's 0 on a loaded one)
    b = e["batching"]
    assert 0.2 < b["alpha"]["estimate"] < 1.0
    assert b["alpha"]["low"] <= b["alpha"]["estimate"] <= b["alpha"]["high"]
    assert [r["concurrency"] for r in b["levels"]] == [1, 2, 4]
    md = (out / "report.md").read_text()
    assert "## Context depth" in md and "| 0 (c=1 level) |" in md
    assert "## Batching model" in md and "α = " in md
    for name in ("depth_tps.svg", "depth_ttft.svg", "batching.svg"):
        assert (out / name).read_text().startswith("<svg")
    rows = (out / "report.csv").read_text()
    assert ",depth=40," in rows
