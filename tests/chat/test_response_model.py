"""The chat's outcomes say the model the server's answer named (``response_model``, the
span's ``gen_ai.response.model``): from bytes real servers sent, over each wire API;
never the model asked for; kept when the stream is cut short; None from an in-process
engine with no server inside, which has no answer to name one (tests/engines/
test_llamacpp_prebuilt.py: llama.cpp's C API, None; the prebuilt's own server, its GGUF)."""

from __future__ import annotations

import pytest

from tests.support.made_outcomes import KeptOutcomes
from tests.support.recorded_upstream import models_named, recorded, serving
from tui.core.outcome import Outcomes

ASKED = "asked-for"  # the configured model: never what the outcome says was answered


def config(url: str, kind: str = "openai", endpoint: str = "chat") -> str:
    return (
        'default_engine = "up"\n[generation]\nmax_tokens = 8\n'
        f'[engines.up]\nkind = "{kind}"\nurl = "{url}"\nmodel = "{ASKED}"\n'
        f'endpoint = "{endpoint}"\n'
    )


@pytest.mark.parametrize(
    ("stream", "kind", "endpoint"),
    [
        ("llama-server_chat_reasoning.sse", "openai", "chat"),
        ("llama-server_completions.sse", "openai", "completions"),
        ("vllm_responses_reasoning_example.sse", "openai", "responses"),
        ("llama-server_messages_thinking.sse", "anthropic", "chat"),
    ],
)
async def test_the_chat_outcome_names_the_model_the_server_answered(chat, stream, kind, endpoint):
    body = recorded(stream)
    (named,) = models_named(body)
    up = serving(body)
    try:
        keep, outcomes = KeptOutcomes(), Outcomes()
        outcomes.add(keep)
        core, _events = chat(config(up.url, kind, endpoint), outcomes=outcomes)
        await core.run_turn(core.start_turn("hello"))
    finally:
        up.stop()
    (outcome,) = keep.seen
    assert outcome.source == "chat" and outcome.state == "done"
    assert outcome.model == ASKED  # asked for ...
    assert outcome.response_model == named != ASKED  # ... and answered by
    assert core.live["A"] is not None and core.live["A"].timeline.response_model == named


async def test_a_stream_cut_short_still_names_its_model(chat):
    """The server named its model, then closed mid-answer: a failed outcome, named."""
    body = recorded("llama-server_chat_reasoning.sse")
    cut = b"\n\n".join(body.split(b"\n\n")[:4]) + b"\n\n"  # three events, no [DONE]
    up = serving(cut)
    try:
        keep, outcomes = KeptOutcomes(), Outcomes()
        outcomes.add(keep)
        core, _events = chat(config(up.url), outcomes=outcomes)
        await core.run_turn(core.start_turn("hello"))
    finally:
        up.stop()
    (outcome,) = keep.seen
    assert outcome.state == "failed" and outcome.error_kind == "protocol"
    assert outcome.response_model == "smollm2-think"


async def test_an_in_process_engine_names_no_model(chat, two):
    keep, outcomes = KeptOutcomes(), Outcomes()
    outcomes.add(keep)
    core, _events = chat(two, outcomes=outcomes)
    await core.run_turn(core.start_turn("hello"))
    (outcome,) = keep.seen
    assert outcome.state == "done" and outcome.response_model is None
