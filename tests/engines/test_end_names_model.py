"""The event that ends a stream names the model the server's answer named (Finished /
Failed ``model``, what every outcome's ``response_model`` comes from): over every
captured stream of a real llama-server and vLLM, Ollama's lines, a stream cut short, a
stream that names none."""

from __future__ import annotations

import json

import pytest

from tests.engines.test_dialects import chat, run, sse
from tests.support.recorded_upstream import STREAMS, models_named, recorded
from tui.core.events import Failed, Finished
from tui.engines.dialects.kinds import decoder_for

DIALECTS = {
    "chat": "openai-chat",
    "completions": "openai-completions",
    "responses": "openai-responses",
    "messages": "anthropic",
}


@pytest.mark.parametrize("name", sorted(p.name for p in STREAMS.glob("*.sse")))
def test_every_captured_stream_ends_naming_its_model(name):
    body = recorded(name)
    (named,) = models_named(body)
    end = run(decoder_for(DIALECTS[name.removesuffix(".sse").split("_")[1]]), body)[-1]
    assert isinstance(end, Finished) and end.model == named


def test_ollama_lines_name_their_model():
    lines = [
        {"model": "llama3.2:1b", "message": {"role": "assistant", "content": "hi"}, "done": False},
        {"model": "llama3.2:1b", "done": True, "done_reason": "stop", "eval_count": 1},
    ]
    body = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    end = run(decoder_for("ollama"), body)[-1]
    assert isinstance(end, Finished) and end.model == "llama3.2:1b"


def test_a_cut_stream_and_a_silent_one():
    cut = run(decoder_for("openai-chat"), sse({**chat({"content": "h"}), "model": "m1"}))[-1]
    assert isinstance(cut, Failed) and cut.kind == "protocol" and cut.model == "m1"
    silent = run(decoder_for("openai-chat"), sse(chat({"content": "h"}, "stop"), "[DONE]"))[-1]
    assert isinstance(silent, Finished) and silent.model is None
