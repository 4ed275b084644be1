"""The Ollama engine against the emulator (Ollama's documented API, a real model)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.support.stream_check import collect
from tui.core.events import EngineReport, Usage
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.dialects.ollama import truth_from_final
from tui.engines.http.ollama import OllamaEngine
from tui.telemetry.servers.ollama_ps import loaded_models, parse_ps

PROMPT = "Name one colour."


def engine(url: str, **kw: object) -> OllamaEngine:
    return OllamaEngine(EngineSpec(name="ollama", kind="ollama", url=url, **kw))  # type: ignore[arg-type]


def req(n: int = 12, prompt: str = PROMPT) -> GenerationRequest:
    return GenerationRequest.from_prompt(prompt, max_tokens=n, temperature=0.0)


async def test_stream_reports_ollama_durations_as_engine_truth(ollama_emu) -> None:
    url, _emu = ollama_emu
    e = engine(url)
    await e.load()
    assert e.model == "smollm2:135m" and e.version and "emulator" in e.version
    r = await collect(e, req(12, "Say something about the sea."))
    assert r.failed is None and r.text.strip()
    truth = r.timeline.truth
    assert truth is not None and truth.source == "ollama durations"
    assert truth.output_tokens == r.metrics.output_tokens
    assert r.metrics.output_tokens_source == "usage"
    assert 1 <= r.metrics.output_tokens <= 12
    assert truth.decode_ms and truth.decode_ms > 0 and truth.decode_tps
    assert truth.prompt_eval_tokens and truth.prompt_eval_tokens > 5
    assert truth.prompt_ms and r.metrics.ttft_ms and r.metrics.ttft_ms >= truth.prompt_ms
    assert r.metrics.prefill_tps_source == "engine"
    assert truth.raw["total_duration"] >= truth.raw["eval_duration"]
    await e.close()


async def test_prompt_cache_hit_omits_prompt_eval_count(ollama_emu) -> None:
    url, _ = ollama_emu
    e = engine(url)
    first = await collect(e, req(4, "Repeat after me: blue."))
    second = await collect(e, req(4, "Repeat after me: blue."))
    assert first.timeline.truth and first.timeline.truth.prompt_eval_tokens
    t2 = second.timeline.truth
    assert t2 is not None and second.failed is None
    assert "prompt_eval_count" not in t2.raw and t2.prompt_eval_tokens is None
    assert t2.prompt_ms is None and t2.prefill_tps is None  # unknown, not 0 tok/s
    assert "cache" in t2.raw["note"]
    usage = [ev for ev in second.events if isinstance(ev, Usage)]
    assert usage and usage[0].prompt_tokens is None and usage[0].output_tokens == 4
    await e.close()


async def test_keep_alive_zero_unloads_and_the_next_request_is_cold(ollama_emu) -> None:
    url, emu = ollama_emu
    e = engine(url)
    await e.load()
    assert [m.name for m in loaded_models(url)] == ["smollm2:135m"]
    warm = await collect(e, req(3))
    await e.unload()
    assert loaded_models(url) == []
    loads_before = emu.loads
    cold = await collect(e, req(3))
    assert emu.loads == loads_before + 1
    assert warm.timeline.truth and cold.timeline.truth
    warm_load, cold_load = warm.timeline.truth.load_ms, cold.timeline.truth.load_ms
    assert cold_load is not None and cold_load > 20  # a real model load
    assert warm_load is None or warm_load < cold_load / 10
    await e.close()


async def test_keep_alive_zero_in_the_request_itself(ollama_emu) -> None:
    url, _ = ollama_emu
    e = engine(url, options={"keep_alive": 0})
    r = await collect(e, req(2))
    assert r.failed is None
    assert loaded_models(url) == []
    await e.close()


def test_api_ps_and_tags_shapes(ollama_emu) -> None:
    url, _ = ollama_emu
    with urllib.request.urlopen(url + "/api/tags") as f:
        tags = json.load(f)
    assert tags["models"][0]["name"] == "smollm2:135m" and tags["models"][0]["size"] > 1e7
    body = json.dumps({"model": "smollm2:135m", "keep_alive": "1m"}).encode()
    urllib.request.urlopen(urllib.request.Request(url + "/api/generate", data=body)).read()
    (m,) = loaded_models(url)
    assert m.size > 1e7 and m.size_vram == 0 and m.cpu_fraction == 1.0
    assert m.placement == "100% CPU" and m.expires_at


def test_ps_spill_arithmetic() -> None:
    (m,) = parse_ps({"models": [{"name": "x", "size": 1000, "size_vram": 750}]})
    assert m.cpu_fraction == pytest.approx(0.25) and m.placement == "25%/75% CPU/GPU"
    (g,) = parse_ps({"models": [{"name": "x", "size": 1000, "size_vram": 1000}]})
    assert g.placement == "100% GPU"


def test_truth_from_final_handles_missing_fields() -> None:
    t = truth_from_final({"done": True, "eval_count": 5, "eval_duration": 50_000_000})
    assert t.decode_tps == pytest.approx(100.0)
    assert t.load_ms is None and t.prompt_eval_tokens is None and t.prompt_ms is None


async def test_wrong_model_name_shows_the_server_message(ollama_emu) -> None:
    url, _ = ollama_emu
    r = await collect(engine(url, model="llama9:404b"), req(2))
    assert r.failed is not None and r.failed.kind == "http"
    assert r.failed.message.startswith("HTTP 404") and "llama9:404b" in r.failed.message
    assert "not found" in r.failed.message


async def test_report_comes_before_finished(ollama_emu) -> None:
    url, _ = ollama_emu
    r = await collect(engine(url), req(2))
    kinds = [type(ev).__name__ for ev in r.events]
    assert kinds.index("EngineReport") < kinds.index("Finished")
    assert any(isinstance(ev, EngineReport) for ev in r.events)


@pytest.mark.parametrize(
    ("mode", "kind", "needle"),
    [
        ("malformed", "protocol", "malformed NDJSON line"),
        ("truncated", "protocol", "malformed NDJSON line"),
        ("close-mid", "protocol", "closed"),
        ("close-clean", "protocol", "closed"),
        ("500", "http", "the model crashed"),
        ("html", "protocol", "not NDJSON"),
    ],
)
async def test_ndjson_faults(faults: str, mode: str, kind: str, needle: str) -> None:
    r = await collect(engine(f"{faults}/{mode}", model="m"), req(4))
    assert r.failed is not None and r.failed.kind == kind, r.failed
    assert needle in r.failed.message
    if mode not in ("500", "html"):
        assert r.text.startswith("Hello")


async def test_ndjson_stall(faults: str) -> None:
    e = engine(f"{faults}/stall", model="m", read_timeout_s=5.0, stall_timeout_s=0.4)
    r = await collect(e, req(4))
    assert r.failed is not None and r.failed.kind == "timeout" and r.text == "Hello"


async def test_ollama_connection_refused(closed_port_url: str) -> None:
    r = await collect(engine(closed_port_url, model="m"), req(2))
    assert r.failed is not None and r.failed.kind == "connect"
    assert "connection refused" in r.failed.message


def test_emulator_generate_without_streaming(ollama_emu) -> None:
    url, _ = ollama_emu
    body = {
        "model": "smollm2",
        "prompt": "Say hi.",
        "stream": False,
        "options": {"num_predict": 3, "temperature": 0},
    }
    rq = urllib.request.Request(url + "/api/generate", data=json.dumps(body).encode())
    with urllib.request.urlopen(rq) as f:
        res = json.load(f)
    assert res["done"] is True and res["response"] and res["eval_count"] <= 3
    assert res["total_duration"] >= res["eval_duration"] > 0
    assert "message" not in res
