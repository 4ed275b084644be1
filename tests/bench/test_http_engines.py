"""Benches over HTTP: the pace server (known per-request speed, so η is known) and the
real llama-server (skipped loudly when its binary is not installed)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import statistics
import subprocess

import httpx
import pytest

from tui.bench.run.plan import BenchPlan
from tui.bench.run.runner import BenchRunner
from tui.bench.stats.aggregate import summarize_result
from tui.engines.base import EngineSpec

INTERVAL_MS = 20.0


def plan(**kw) -> BenchPlan:
    base = dict(engines=["pace"], runs=3, warmup=1, prompt_tokens=40, max_tokens=10)
    base.update(kw)
    return BenchPlan(**base)


async def bench(p: BenchPlan, spec: EngineSpec):
    res = await BenchRunner(p, [spec]).run()
    return summarize_result(res)["engines"][0], res


def server_account(url: str, p: BenchPlan, res) -> dict[str, dict[str, object]]:  # type: ignore[no-untyped-def]
    """What the pace server itself did, per level, from its own send times (GET /stamps,
    matched to the bench's records by seed: the bench sends seed = plan seed + index):
    its total rate (tokens ÷ first token sent → last token sent) and each request's decode
    rate. A busy machine slows the server and the bench alike; these say by how much."""
    stamps = httpx.get(url + "/stamps", timeout=10).json()
    rid = {seed: r for r, seed in stamps["seed"].items()}
    out: dict[str, dict[str, object]] = {}
    for lv in res.engines[0].levels:
        sent = [stamps["sent_ns"][rid[p.seed + r.index]] for r in lv.records]
        span_s = (max(s[-1] for s in sent) - min(s[0] for s in sent)) / 1e9
        decode = [(len(s) - 1) / ((s[-1] - s[0]) / 1e9) for s in sent]
        out[lv.label] = {"tps": sum(map(len, sent)) / span_s, "decode": decode}
    return out


def max_active(url: str) -> int:
    """The most requests the pace server ever served at once."""
    return int(httpx.get(url + "/stats", timeout=10).json()["max_active"])


async def test_eta_against_the_pace_server(pace_server_url):
    """η and decode rates over real HTTP, checked against the server's own account of
    what it sent rather than against its nominal pace: on a busy machine both sides
    slow down together, and the relation holds at any speed."""
    url = pace_server_url(interval_ms=INTERVAL_MS, ttft_ms=20.0, concurrency=8)
    p = plan(concurrency=[1, 4])
    e, res = await bench(p, EngineSpec("pace", "openai", url=url))
    c1, c4 = e["levels"]
    assert c1["ok"] == 3 and c4["ok"] == 12 and e["failed"] == 0
    assert max_active(url) == 4  # the bench held 4 requests in flight
    served = server_account(url, p, res)
    assert c4["eta"] == pytest.approx(served["c=4"]["tps"] / served["c=1"]["tps"], rel=0.1)
    for lv in (c1, c4):
        sent = statistics.median(served[lv["label"]]["decode"])  # type: ignore[arg-type]
        assert lv["medians"]["decode_tps"]["estimate"] == pytest.approx(sent, rel=0.1)
        # about its pace (a sanity check of the test server, not of the bench): it keeps
        # an absolute schedule, so after a late first send (a loaded machine) it catches up
        # and the first→last window runs a little fast (50.4 tok/s for 50 seen with both
        # cores busy); a server that ignored its pace would be several times faster
        assert sent <= 1000 / INTERVAL_MS * 1.1
    # the pace server counts prompt words: calibration by usage probe hits the target
    assert e["prompt"]["method"] == "usage probe" and e["prompt"]["counted_tokens"] == 40
    # an OpenAI URL says nothing about its slots: the bench warns instead of guessing
    assert e["capacity"] is None
    assert any("capacity is unknown" in w for w in e["warnings"])


async def test_fairness_notes_say_what_a_generic_server_was_sent(pace_server_url):
    """A generic OpenAI server is sent neither cache_prompt nor ignore_eos: the report
    must not claim prompt-cache reuse was off, and says the length was what it was."""
    url = pace_server_url(interval_ms=5.0)
    p = plan(runs=2, warmup=0)
    res = await BenchRunner(p, [EngineSpec("pace", "openai", url=url)]).run()
    notes = summarize_result(res)["fairness"]
    assert res.engines[0].controls["cache_prompt"].startswith("not enforced")
    assert res.engines[0].controls["ignore_eos"].startswith("not enforced")
    cache = next(n for n in notes if n.startswith("pace: prompt-cache reuse"))
    assert "not enforced" in cache and "reuse cannot be ruled out" in cache
    length = next(n for n in notes if n.startswith("pace: output length"))
    assert "ignore_eos not enforced" in length
    assert not any("cache_prompt=false) and every prompt is distinct" in n for n in notes)


async def test_eta_saturates_at_the_servers_slots(pace_server_url):
    url = pace_server_url(interval_ms=INTERVAL_MS, ttft_ms=20.0, concurrency=2)
    p = plan(concurrency=[1, 4])
    e, res = await bench(p, EngineSpec("pace", "openai", url=url))
    assert max_active(url) == 2  # 4 sent at once, 2 served at once: η is two slots' worth
    served = server_account(url, p, res)
    eta = served["c=4"]["tps"] / served["c=1"]["tps"]  # type: ignore[operator]
    assert e["levels"][1]["eta"] == pytest.approx(eta, rel=0.1)


async def test_cold_cannot_be_forced_on_a_server_infertop_did_not_start(pace_server_url):
    url = pace_server_url(interval_ms=5.0)
    e, _ = await bench(plan(cold=True), EngineSpec("pace", "openai", url=url))
    assert e["cold_method"] is None and "infertop did not start" in e["cold_note"]


def test_cli_url_engine(pace_server_url, infertop_cmd, cli_env, tmp_path):
    url = pace_server_url(interval_ms=5.0)
    out = tmp_path / "o"
    p = subprocess.run(
        [
            *infertop_cmd,
            "bench",
            "--url",
            url,
            "--runs",
            "2",
            "--max-tokens",
            "5",
            "--concurrency",
            "1,2",
            "--out",
            str(out),
        ],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["engines"][0]["kind"] == "openai"  # detected: a generic OpenAI server
    assert report["summary"]["engines"][0]["ok"] == 6
    # how the stamps were taken, and under which interpreter discipline, is on record
    env = report["environment"]
    name = report["engines"][0]["name"]
    assert env["stamp_sources"][name]  # e.g. ["kernel receive time (SO_TIMESTAMPNS)"]
    assert "GIL switch interval 0.2 ms" in env["measuring"]
    assert env["http_receive_stamps"]
    assert "Stamps: " + name in (out / "report.md").read_text()
    # the loop it ran on (uvloop is a dependency wherever it installs)
    uvloop = importlib.util.find_spec("uvloop")
    assert env["event_loop"].startswith("uvloop " if uvloop else "asyncio"), env["event_loop"]


def test_cli_url_that_refuses_connections_is_refused_up_front(infertop_cmd, cli_env, tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.run(
        [
            *infertop_cmd,
            "bench",
            "--url",
            f"http://127.0.0.1:{port}",
            "--runs",
            "1",
            "--out",
            str(tmp_path / "o"),
        ],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"infertop bench: error: --url http://127.0.0.1:{port}")
    assert "refused" in last


def cli_bench_url(url: str, out) -> dict:  # type: ignore[no-untyped-def]
    import os
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, INFERTOP_CONFIG="", PYTHONPATH=str(root))
    args = ["bench", "--url", url, "--runs", "2", "--max-tokens", "8", "--warmup", "0"]
    p = subprocess.run(
        [sys.executable, "-m", "tui", *args, "--prompt-tokens", "32", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads((out / "report.json").read_text())


@pytest.mark.engine
async def test_real_llama_server_bench(tmp_path, model_path):
    from tests.support import real_servers as servers

    try:
        sp = servers.start_llama_server(model_path, tmp_path)
    except servers.ServerStartError as e:
        servers.unavailable("llama-server", str(e))
    try:
        p = plan(runs=3, max_tokens=16, prompt_tokens=96, concurrency=[1, 2], cold=True)
        e, res = await bench(p, EngineSpec("ls", "llama-server", url=sp.url))
        by_url = await asyncio.to_thread(cli_bench_url, sp.url, tmp_path / "by-url")
    finally:
        sp.stop()
    # benched by URL alone, it is detected as llama-server: its timings are the truth
    # and ignore_eos is honoured, as with the configured engine
    assert by_url["engines"][0]["kind"] == "llama-server"
    warm = [r for r in by_url["engines"][0]["records"] if r["phase"] == "warm"]
    assert len(warm) == 2
    for rec in warm:
        assert rec["metrics"]["output_tokens"] == 8
        assert rec["metrics"]["prefill_tps_source"] == "engine"
    assert e["error"] is None and e["failed"] == 0
    assert e["capacity"] == 1 and "total_slots" in e["capacity_note"]  # -np 1
    assert any("exceeds ls's parallel capacity (1)" in w for w in e["warnings"])
    assert e["prompt"]["method"] == "usage probe"
    assert abs(e["prompt"]["counted_tokens"] - 96) <= 2
    assert "infertop did not start" in e["cold_note"]
    # fairness notes from what was sent and what the server's answers show
    notes = summarize_result(res)["fairness"]
    assert res.engines[0].controls["cache_prompt"] == "sent (cache_prompt: false)"
    cache = next(n for n in notes if n.startswith("ls: prompt-cache reuse"))
    assert "sent (cache_prompt: false)" in cache and "reported 0 cached prompt tokens" in cache
    length = next(n for n in notes if n.startswith("ls: output length"))
    assert "fixed: all" in length and "sent (ignore_eos: true)" in length
    warm = [r for r in res.engines[0].measured() if r.level == "c=1"]
    for r in warm:
        m = r.metrics
        assert m.output_tokens == 16  # ignore_eos honoured
        assert m.prefill_tps_source == "engine"  # llama-server timings
        assert r.timeline.truth is not None and r.timeline.truth.cached_tokens == 0


@pytest.mark.vllm
@pytest.mark.engine
@pytest.mark.timeout(900)  # the vLLM server starts inside this test (65-400 s)
async def test_real_vllm_bench(tmp_path):
    """vLLM's CPU build (its own venv): a tiny bench; skipped loudly where it cannot start."""
    from tests.support import real_servers as servers

    try:
        sp = servers.start_vllm_server(tmp_path)
    except servers.ServerStartError as e:
        servers.unavailable("vLLM", str(e))
    try:
        p = plan(runs=2, warmup=1, max_tokens=8, prompt_tokens=64, concurrency=[1, 2])
        e, res = await bench(p, EngineSpec("vllm", "vllm", url=sp.url, model="smollm2"))
    finally:
        sp.stop()
    assert e["error"] is None and e["failed"] == 0 and e["ok"] == 6
    assert e["prompt"]["method"] == "usage probe"
    assert abs(e["prompt"]["counted_tokens"] - 64) <= 2
    for r in res.engines[0].measured():
        # vLLM's role-only first chunk must not count as the first token; it often
        # shares a network read with the first token (one stamp per read), so >=
        assert r.metrics.output_tokens == 8 and r.metrics.ttft_ms >= r.metrics.ttfr_ms
    assert e["levels"][1]["eta"] is not None


@pytest.mark.engine
async def test_ollama_cold_start_by_unload_and_load_duration(model_path):
    """Ollama (the issue-3 emulator, real generation): cold = keep_alive 0, then the next
    request's load_duration is the load time; the emulator runs one request at a time."""
    from tests.support import ollama_emulator

    emu = ollama_emulator.OllamaEmulator(model_path, n_threads=2)
    port, stop = ollama_emulator.start_in_thread(emu)
    try:
        p = plan(runs=2, warmup=0, max_tokens=8, prompt_tokens=64, cold=True)
        spec = EngineSpec("ollama", "ollama", url=f"http://127.0.0.1:{port}")
        e, res = await bench(p, spec)
    finally:
        stop()
    assert e["error"] is None and e["failed"] == 0
    assert e["cold_method"].startswith("unload the model (keep_alive: 0)")
    cold = res.engines[0].cold.records
    assert len(cold) == 2 and all(r.ok for r in cold)
    # each cold request really loaded the model: the emulator's load_duration, > 0
    assert all(r.load_ms is not None and r.load_ms > 0 for r in cold)
    assert e["cold"]["load_ms"]["estimate"] > 0
    warm = [r for r in res.engines[0].measured() if r.phase == "warm"]
    assert all(r.ok for r in warm)
