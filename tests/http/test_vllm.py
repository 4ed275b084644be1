"""The real vLLM OpenAI server (CPU build, own venv) serving SmolLM2 in HF format.

vLLM takes 65-80 s and ~3.8 GB to start on 2 cores: it starts once per session
(``vllm_server`` in conftest.py, shared with the fleet tests) and the tests stay few and
short.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.stream_check import collect
from tui.core.events import TextChunk, Usage
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.http.vllm import VLLMEngine
from tui.engines.servers.detect import detect_server
from tui.telemetry.servers.vllm_metrics import VLLMMetrics

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Tell me about the moon."
pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(900)]


def engine(url: str, **kw: object) -> VLLMEngine:
    return VLLMEngine(EngineSpec(name="vllm", kind="vllm", url=url, **kw))  # type: ignore[arg-type]


def req(n: int = 16) -> GenerationRequest:
    return GenerationRequest.from_prompt(PROMPT, max_tokens=n, temperature=0.0, ignore_eos=True)


async def test_stream_usage_and_engine_truth(vllm_server) -> None:
    e = engine(vllm_server.url)
    await e.load()
    assert e.model == "smollm2"
    r = await collect(e, req(24))
    m = r.metrics
    assert r.failed is None and m.finish_reason == "length"
    (usage,) = [ev for ev in r.events if isinstance(ev, Usage)]
    assert m.output_tokens == usage.output_tokens == 24 and m.output_tokens_source == "usage"
    # vLLM's first chunk is role-only: it marks TTFR, not TTFT.
    assert m.ttfr_ms is not None and m.ttft_ms is not None and m.ttfr_ms <= m.ttft_ms
    truth = r.timeline.truth
    assert truth is not None and truth.source.startswith("vllm /metrics")
    assert truth.output_tokens == 24 and truth.prompt_tokens == usage.prompt_tokens
    assert truth.prompt_ms is not None and 0 < truth.prompt_ms <= m.ttft_ms
    assert m.decode_tps_vs_engine is not None and 0.75 < m.decode_tps_vs_engine < 1.25
    await e.close()


async def test_continuous_usage_gives_per_chunk_counts(vllm_server) -> None:
    e = engine(vllm_server.url, options={"continuous_usage_stats": True, "metrics_truth": False})
    r = await collect(e, req(12))
    chunks = [ev for ev in r.events if isinstance(ev, TextChunk)]
    assert chunks and all(c.tokens is not None and c.tokens >= 1 for c in chunks)
    assert sum(c.tokens or 0 for c in chunks) == 12 == r.metrics.output_tokens
    assert not r.metrics.itl_token_estimated and r.timeline.truth is None
    await e.close()


async def test_overlapping_requests_get_no_attributed_truth(vllm_server) -> None:
    e = engine(vllm_server.url)
    a, b = await asyncio.gather(collect(e, req(8)), collect(e, req(8)))
    assert a.failed is None and b.failed is None
    assert a.metrics.output_tokens == b.metrics.output_tokens == 8
    # Two requests finished inside each window: nothing can be attributed, so nothing is.
    assert a.timeline.truth is None or b.timeline.truth is None
    await e.close()


async def test_wrong_model_name(vllm_server) -> None:
    r = await collect(engine(vllm_server.url, model="no-such-model"), req(2))
    assert r.failed is not None and r.failed.kind == "http"
    assert r.failed.message.startswith("HTTP 404") and "no-such-model" in r.failed.message


async def test_metrics_windows_and_gauges(vllm_server) -> None:
    scraper = VLLMMetrics(vllm_server.url)
    scraper.sample()
    r = await collect(engine(vllm_server.url, endpoint="completions"), req(8))
    assert r.failed is None and r.metrics.output_tokens == 8
    time.sleep(0.3)
    s = scraper.sample()
    assert s.running == 0 and s.waiting == 0
    assert s.kv_cache_usage is not None and 0 <= s.kv_cache_usage <= 1
    for name in ("ttft", "e2e", "prefill", "decode", "queue", "itl"):
        assert name in s.windows, name
    assert s.windows["e2e"].count == 1 and s.windows["itl"].count == 7
    p = s.percentiles_ms("ttft")
    assert p["p50"] is not None and p["p50"] > 0
    assert s.generation_tps and s.generation_tps > 0
    empty = scraper.sample()
    assert empty.windows["e2e"].count == 0 and empty.percentiles_ms("e2e")["p50"] is None


def test_detected_as_vllm(vllm_server) -> None:
    d = detect_server(vllm_server.url)
    assert d.kind == "vllm" and d.models == ["smollm2"] and d.version


def test_cli_run_json(vllm_server, tmp_path) -> None:
    env = dict(os.environ, INFERTOP_CONFIG="", XDG_CONFIG_HOME=str(tmp_path))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tui",
            "run",
            "--url",
            vllm_server.url,
            "--prompt",
            PROMPT,
            "--max-tokens",
            "8",
            "--temperature",
            "0",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["kind"] == "vllm" and res["engine_truth"]["prompt_ms"] > 0
    assert res["vs_engine"]["ttft_minus_engine_prefill_ms"] >= 0


async def test_context_size_from_models_and_a_depth_beyond_it_is_refused(vllm_server) -> None:
    """vLLM lists max_model_len in /v1/models (the server runs with --max-model-len 1024):
    the engine reports it, and --depth beyond it is refused before any request."""
    from tui.bench.run.plan import BenchPlan
    from tui.bench.run.runner import BenchRunner

    e = engine(vllm_server.url)
    await e.load()
    assert e.info().context_size == 1024
    await e.close()
    plan = BenchPlan(
        engines=["vllm"], runs=1, warmup=0, prompt_tokens=32, max_tokens=8,
        concurrency=[1], depths=[0, 2000],
    )  # fmt: skip
    spec = EngineSpec(name="vllm", kind="vllm", url=vllm_server.url)
    res = await BenchRunner(plan, [spec]).run()
    refused = res.engines[0]
    assert refused.error is not None and "n_ctx 1024" in refused.error
    assert "--depth 2000" in refused.error and not refused.records()
