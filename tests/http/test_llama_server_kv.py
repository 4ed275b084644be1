"""The KV line's data from the real llama-server: /slots tokens across three turns, and
the KV layout read from the GGUF file the (local) server serves."""

from __future__ import annotations

import pytest

from tests.support.stream_check import collect
from tui.core.events import Usage
from tui.core.kv import MODEL_METADATA, KvLayout
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.http.llama_server import LlamaServerEngine, server_kv_layout
from tui.telemetry.servers.server import server_probe

pytestmark = pytest.mark.engine

QUESTIONS = ["Name three colours.", "Why is the sky blue?", "And the sea?"]


async def test_slot_context_grows_across_three_turns(llama_server, smollm2_gguf) -> None:
    e = LlamaServerEngine(EngineSpec(name="ls", kind="llama-server", url=llama_server.url))
    await e.load()
    info = e.info()
    assert info.parameters["kv_layout_unknown"] == ""
    layout = KvLayout.from_dict(info.parameters["kv_layout"])
    assert layout.bytes_per_token == 30 * 2 * 3 * 64 * 2  # SmolLM2's metadata, f16
    assert layout.cache_type_assumed  # llama-server does not report its cache type
    probe = server_probe("llama-server", llama_server.url, None, layout)
    assert probe is not None
    messages: list[dict[str, str]] = []
    seen = []
    for q in QUESTIONS:
        messages.append({"role": "user", "content": q})
        request = GenerationRequest(
            messages=list(messages), max_tokens=8, temperature=0.0, ignore_eos=True
        )
        r = await collect(e, request)
        assert r.failed is None and r.metrics.finish_reason == "length"
        usage = next(ev for ev in r.events if isinstance(ev, Usage))
        lines = probe.sample()
        kv = probe.kv
        assert kv is not None, lines
        assert kv.source == MODEL_METADATA and kv.n_ctx == 2048
        # the slot holds the prompt and the answer, less the last token drawn (never fed
        # back): what llama-server's own usage says, minus one
        assert kv.tokens_in_context == usage.prompt_tokens + usage.output_tokens - 1
        assert kv.kv_bytes == kv.tokens_in_context * 23_040
        assert kv.estimate and "assumed" in kv.estimate_why
        seen.append(kv.tokens_in_context)
        messages.append({"role": "assistant", "content": r.timeline.text})
    await e.close()
    assert seen[0] < seen[1] < seen[2], seen


def test_layout_of_a_remote_or_unreadable_model_is_unknown(smollm2_gguf) -> None:
    layout, why = server_kv_layout("http://gpu-box.example:8080", str(smollm2_gguf))
    assert layout is None and why.startswith("remote server")
    layout, why = server_kv_layout("http://127.0.0.1:8080", "/nonexistent/model.gguf")
    assert layout is None and "not readable here: model.gguf" in why
    layout, why = server_kv_layout("http://localhost:8080", str(smollm2_gguf))
    assert layout is not None and why == ""
