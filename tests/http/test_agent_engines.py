"""infertop's own engines speaking the APIs agents use, against the real llama-server made
to reason (tests/support/thinking_servers.py): kind ``openai`` with ``endpoint =
"responses"``, kind ``anthropic`` (``x-api-key`` from ``api_key_env``), and the chat API.
Each answer comes back with its reasoning apart, TTFO after TTFT, and the server's counts.
"""

from __future__ import annotations

import pytest

from tests.support import thinking_bodies as tb
from tests.support.stream_check import collect
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.http.anthropic import AnthropicEngine
from tui.engines.http.http_common import request_headers
from tui.engines.http.llama_server import LlamaServerEngine
from tui.engines.http.openai_compat import OpenAICompatEngine

pytestmark = pytest.mark.engine

BUDGET = {"thinking_budget_tokens": tb.REASONING_BUDGET}


def request() -> GenerationRequest:
    return GenerationRequest.from_prompt(tb.QUESTION, max_tokens=40, temperature=0.0, seed=tb.SEED)


@pytest.mark.parametrize(
    ("kind", "endpoint", "extra"),
    [
        ("openai", "chat", BUDGET),
        ("llama-server", "chat", BUDGET),
        ("openai", "responses", BUDGET),
        ("anthropic", "chat", {"thinking": {"type": "enabled", "budget_tokens": 6}}),
    ],
    ids=["chat", "llama-server-chat", "responses", "anthropic"],
)
async def test_reasoning_answers_through_each_api(
    thinking_llama_server, kind, endpoint, extra, monkeypatch
) -> None:
    monkeypatch.setenv("INFERTOP_TEST_KEY", "sk-test")
    spec = EngineSpec(
        "t",
        kind,
        model=tb.MODEL_ALIAS,
        url=thinking_llama_server.url,
        endpoint=endpoint,
        api_key_env="INFERTOP_TEST_KEY",
        options={"extra_body": extra},
    )
    cls = {"openai": OpenAICompatEngine, "llama-server": LlamaServerEngine}.get(
        kind, AnthropicEngine
    )
    engine = cls(spec)
    try:
        await engine.load()
        r = await collect(engine, request())
    finally:
        await engine.close()
    assert r.failed is None
    m = r.metrics
    assert r.timeline.reasoning_text == "The capital of France is"
    assert r.timeline.text == 'The answer is: "Paris"'
    assert m.ttft_ms is not None and m.ttfo_ms is not None and m.ttfo_ms > m.ttft_ms
    assert m.output_tokens_source == "usage" and m.output_tokens == 18
    assert m.reasoning_tokens and m.answer_tokens and m.thinking_ms
    if kind == "llama-server":  # its timings: the engine's own account beside ours
        assert m.engine_decode_tps is not None and m.prefill_tps_source == "engine"
    else:  # the cached part of the prompt, from the API's usage (a bench's fairness check)
        assert r.timeline.truth is not None and r.timeline.truth.cached_tokens is not None


def test_the_anthropic_key_goes_in_x_api_key_not_authorization() -> None:
    headers = request_headers(EngineSpec("a", "anthropic", url="http://x"), "sk-secret")
    assert headers["x-api-key"] == "sk-secret" and "Authorization" not in headers
    assert headers["anthropic-version"] == "2023-06-01"
    openai_headers = request_headers(EngineSpec("o", "openai", url="http://x"), "sk-secret")
    assert (
        openai_headers["Authorization"] == "Bearer sk-secret" and "x-api-key" not in openai_headers
    )


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_run_speaks_the_api_asked_for(thinking_llama_server, api, tmp_path) -> None:
    """``infertop run --url URL --api API``: the detected server spoken to in that API;
    --json carries the reasoning apart (no budget closes the think block here: the model
    ends its turn inside it, all reasoning and no answer)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    cmd = [sys.executable, "-m", "tui", "run", "--url", thinking_llama_server.url]
    cmd += ["--api", api, "--prompt", tb.QUESTION, "--max-tokens", "12", "--temperature", "0"]
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, INFERTOP_CONFIG="", PYTHONPATH=root, HOME=str(tmp_path))
    out = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["kind"] == ("anthropic" if api == "messages" else "llama-server")
    assert result["reasoning_text"] == "The capital of France is Paris." and result["text"] == ""
    # the server's count (its end token too) beside the chunks that carried reasoning
    assert result["output_tokens_source"] == "usage"
    assert 0 < result["reasoning_tokens"] <= result["output_tokens"]
    assert result["reasoning_tokens_source"] == "chunk-count-estimate"
    assert result["ttft_ms"] > 0 and result["ttfo_ms"] is None and result["thinking_ms"] > 0
