"""The wire-format decoders (tui/engines/dialects): what each payload of each API becomes.

Shapes are those of the real servers' streams (tests/data/streams, captured from
llama-server; the Responses and Messages events as their API references write them).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tui.core.events import (
    ANSWER,
    REASONING,
    TOOL,
    EngineReport,
    Failed,
    Finished,
    StreamEvent,
    TextChunk,
    Usage,
)
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.dialects import decoder_for, whole_answer
from tui.engines.dialects.base import StreamDecoder
from tui.engines.dialects.errors import StreamProtocolError, StreamServerError
from tui.engines.dialects.ollama import truth_from_final


def sse(*objs: Any) -> bytes:
    out = b""
    for o in objs:
        data = o if isinstance(o, str) else json.dumps(o)
        out += b"data: " + data.encode() + b"\n\n"
    return out


def named_sse(*objs: dict[str, Any]) -> bytes:
    """Events with an ``event:`` line, as the Responses and Messages APIs send them."""
    return b"".join(f"event: {o['type']}\ndata: {json.dumps(o)}\n\n".encode() for o in objs)


def run(dec: StreamDecoder, *reads: bytes) -> list[StreamEvent]:
    """Feed each read with stamps 1000, 2000, ...; close; end."""
    out: list[StreamEvent] = []
    t = 0
    for data in reads:
        t += 1000
        dec.feed(data, t, out.append)
    dec.close(t + 1, out.append)
    out.append(dec.end(t + 2))
    return out


def chunks(events: list[StreamEvent]) -> list[tuple[str, str]]:
    return [(e.part, e.text) for e in events if isinstance(e, TextChunk)]


def chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


# --- OpenAI chat ------------------------------------------------------------------------


def test_chat_reasoning_then_answer_and_usage_with_null_choices() -> None:
    events = run(
        decoder_for("openai-chat"),
        sse(chat({"role": "assistant", "content": None})),
        sse(chat({"reasoning_content": "Let me"})),
        sse(chat({"reasoning_content": " think."})),
        sse(chat({"content": "Paris"})),
        sse(chat({}, "stop")),
        sse(
            {
                "choices": None,
                "usage": {
                    "prompt_tokens": 12,
                    "completion_tokens": 5,
                    "completion_tokens_details": {"reasoning_tokens": 3},
                },
            }
        ),
        sse("[DONE]"),
    )
    assert chunks(events) == [
        (REASONING, "Let me"),
        (REASONING, " think."),
        (ANSWER, "Paris"),
    ]
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage == [Usage(6000, 12, 5, 3)]
    assert events[-1] == Finished(7000, "stop")


def test_chat_reasoning_field_of_vllm() -> None:
    events = run(
        decoder_for("openai-chat"), sse(chat({"reasoning": "hm"}), chat({"content": "x"}, "stop"))
    )
    assert chunks(events) == [(REASONING, "hm"), (ANSWER, "x")]


def test_chat_tool_calls_are_answer_text_name_then_arguments() -> None:
    call = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    events = run(
        decoder_for("openai-chat"),
        sse(chat({"role": "assistant", "tool_calls": [call]})),
        sse(chat({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]})),
        sse(chat({"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]})),
        sse(
            chat(
                {
                    "tool_calls": [
                        {"index": 1, "id": "c2", "function": {"name": "now", "arguments": "{}"}}
                    ]
                }
            )
        ),
        sse(chat({}, "tool_calls")),
        sse("[DONE]"),
    )
    tool = [e for e in events if isinstance(e, TextChunk)]
    assert all(e.part == TOOL for e in tool)
    assert "".join(e.text for e in tool) == 'get_weather({"city": "Paris"})\nnow({})'
    assert tool[-1].tokens == 0  # the closing ")" is no token of its own
    assert events[-1] == Finished(6000, "tool_calls")


def test_legacy_function_call_delta() -> None:
    events = run(
        decoder_for("openai-chat"),
        sse(chat({"function_call": {"name": "f", "arguments": ""}})),
        sse(chat({"function_call": {"arguments": "{}"}}, "function_call")),
    )
    assert "".join(t for _, t in chunks(events)) == "f({})"


def test_think_tags_split_across_chunks_without_a_parser() -> None:
    pieces = ["\n", "<thi", "nk>", "I should", " answer</", "think>", "\n\n", "Hi", " there"]
    events = run(
        decoder_for("openai-chat"),
        *(sse(chat({"content": p})) for p in pieces),
        sse(chat({}, "stop")),
    )
    assert chunks(events) == [
        (REASONING, "I should"),
        (REASONING, " answer"),
        (ANSWER, "Hi"),
        (ANSWER, " there"),
    ]
    # each part is stamped where its first text arrived
    stamps = {e.text: e.t_ns for e in events if isinstance(e, TextChunk)}
    assert stamps["I should"] == 4000 and stamps["Hi"] == 8000


def test_text_that_only_looks_like_a_tag_start_is_answer_at_its_first_stamp() -> None:
    events = run(
        decoder_for("openai-chat"),
        sse(chat({"content": "<"})),
        sse(chat({"content": "b>bold"}, "stop")),
    )
    text = [e for e in events if isinstance(e, TextChunk)]
    assert [(e.part, e.text, e.t_ns) for e in text] == [(ANSWER, "<b>bold", 1000)]


def test_per_chunk_counts_survive_the_think_splitter() -> None:
    """vLLM's continuous usage: each chunk counted; a tag's token moves to the next text."""
    payloads = []
    n = 0
    for p in ["<think>", "a", "b", "</think>", "c"]:
        n += 1
        payloads.append(
            sse({"choices": [{"delta": {"content": p}}], "usage": {"completion_tokens": n}})
        )
    events = run(decoder_for("openai-chat"), *payloads, sse(chat({}, "stop")))
    text = [e for e in events if isinstance(e, TextChunk)]
    assert sum(e.tokens or 0 for e in text) == 5
    assert [(e.part, e.text) for e in text] == [(REASONING, "a"), (REASONING, "b"), (ANSWER, "c")]


def test_chat_error_in_stream_and_malformed_data() -> None:
    with pytest.raises(StreamServerError, match="overloaded"):
        run(decoder_for("openai-chat"), sse({"error": {"message": "overloaded"}}))
    with pytest.raises(StreamProtocolError):
        run(decoder_for("openai-chat"), b"data: {not json\n\n")


def test_a_stream_cut_before_its_end_fails() -> None:
    events = run(decoder_for("openai-chat"), sse(chat({"content": "par"})))
    assert isinstance(events[-1], Failed) and events[-1].kind == "protocol"


# --- the Responses API ------------------------------------------------------------------


def responses_stream() -> bytes:
    return named_sse(
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning"}},
        {"type": "response.reasoning_text.delta", "delta": "Think"},
        {"type": "response.reasoning_text.delta", "delta": "ing"},
        {"type": "response.reasoning_text.done", "text": "Thinking"},
        {"type": "response.output_item.added", "output_index": 1, "item": {"type": "message"}},
        {"type": "response.output_text.delta", "delta": "Hel"},
        {"type": "response.output_text.delta", "delta": "lo"},
        {"type": "response.output_text.done", "text": "Hello"},
        {"type": "response.content_part.done", "part": {"type": "output_text", "text": "Hello"}},
        {
            "type": "response.output_item.done",
            "item": {"type": "message", "content": [{"type": "output_text", "text": "Hello"}]},
        },
        {
            "type": "response.completed",
            "response": {
                "status": "completed",
                "usage": {
                    "input_tokens": 20,
                    "output_tokens": 6,
                    "output_tokens_details": {"reasoning_tokens": 2},
                    "input_tokens_details": {"cached_tokens": 4},
                },
            },
        },
    )


def test_responses_never_count_the_done_repeats() -> None:
    dec = decoder_for("openai-responses")
    events = run(dec, responses_stream())
    assert chunks(events) == [
        (REASONING, "Think"),
        (REASONING, "ing"),
        (ANSWER, "Hel"),
        (ANSWER, "lo"),
    ]
    assert [e for e in events if isinstance(e, Usage)] == [Usage(1000, 20, 6, 2)]
    assert dec.cached_tokens == 4
    assert isinstance(events[-1], Finished) and events[-1].reason == "stop"


def test_responses_function_call_and_incomplete() -> None:
    events = run(
        decoder_for("openai-responses"),
        named_sse(
            {
                "type": "response.output_item.added",
                "item": {"type": "function_call", "name": "lookup"},
            },
            {"type": "response.function_call_arguments.delta", "delta": '{"q":'},
            {"type": "response.function_call_arguments.delta", "delta": '"x"}'},
            {"type": "response.function_call_arguments.done", "arguments": '{"q":"x"}'},
            {
                "type": "response.output_item.done",
                "item": {"type": "function_call", "name": "lookup"},
            },
            {
                "type": "response.incomplete",
                "response": {"incomplete_details": {"reason": "max_output_tokens"}},
            },
        ),
    )
    assert "".join(t for _, t in chunks(events)) == 'lookup({"q":"x"})'
    assert {p for p, _ in chunks(events)} == {TOOL}
    assert isinstance(events[-1], Finished) and events[-1].reason == "length"


def test_responses_failed_is_the_servers_error() -> None:
    with pytest.raises(StreamServerError, match="no capacity"):
        run(
            decoder_for("openai-responses"),
            named_sse(
                {"type": "response.failed", "response": {"error": {"message": "no capacity"}}}
            ),
        )


# --- Anthropic Messages -----------------------------------------------------------------


def anthropic_stream() -> bytes:
    return named_sse(
        {
            "type": "message_start",
            "message": {
                "id": "m1",
                "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Hmm"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "abc"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "ping"},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "name": "calc", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"a":'},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "1}"},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    )


def test_anthropic_thinking_text_tool_and_usage() -> None:
    dec = decoder_for("anthropic")
    events = run(dec, anthropic_stream())
    assert chunks(events) == [
        (REASONING, "Hmm"),
        (ANSWER, "Hi"),
        (TOOL, "calc("),
        (TOOL, '{"a":'),
        (TOOL, "1}"),
        (TOOL, ")"),
    ]
    assert [e for e in events if isinstance(e, Usage)] == [Usage(1000, 15, 9, None)]
    assert dec.cached_tokens == 5
    assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"


def test_anthropic_error_event() -> None:
    with pytest.raises(StreamServerError, match="Overloaded"):
        run(
            decoder_for("anthropic"),
            named_sse(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            ),
        )


# --- Ollama and llama-server's /completion ----------------------------------------------


def test_ollama_thinking_content_tool_calls_and_a_report_of_numbers_only() -> None:
    lines = [
        {"message": {"role": "assistant", "content": "", "thinking": "ponder"}, "done": False},
        {"message": {"role": "assistant", "content": "ok"}, "done": False},
        {
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}],
            },
            "done": False,
        },
        {
            "done": True,
            "done_reason": "stop",
            "message": {"role": "assistant", "content": ""},
            "context": [1, 2, 3],
            "eval_count": 7,
            "eval_duration": 70_000_000,
            "prompt_eval_count": 3,
        },
    ]
    body = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    events = run(decoder_for("ollama"), body)
    assert chunks(events) == [
        (REASONING, "ponder"),
        (ANSWER, "ok"),
        (TOOL, "f("),
        (TOOL, '{"x": 1}'),
        (TOOL, ")"),
    ]
    report = next(e for e in events if isinstance(e, EngineReport))
    assert set(report.truth.raw) == {"eval_count", "eval_duration", "prompt_eval_count"}
    assert [e for e in events if isinstance(e, Usage)] == [Usage(1000, 3, 7, None)]


def test_ollama_generate_report_keeps_no_text_of_the_request() -> None:
    """Issue 43: /api/generate with stream false put ``response``/``thinking`` in the
    engine report, and so in the proxy's --events file."""
    final = {
        "done": True,
        "response": "the answer",
        "thinking": "thoughts",
        "context": [1],
        "eval_count": 2,
    }
    raw = json.dumps(truth_from_final(final).raw)
    assert "the answer" not in raw and "thoughts" not in raw and "context" not in raw


def test_llama_completion_stream() -> None:
    events = run(
        decoder_for("llama"),
        sse({"content": "A", "stop": False}),
        sse(
            {
                "content": "",
                "stop": True,
                "stop_type": "limit",
                "tokens_predicted": 1,
                "tokens_evaluated": 4,
                "timings": {
                    "prompt_n": 4,
                    "prompt_ms": 10.0,
                    "predicted_n": 1,
                    "predicted_ms": 1.0,
                },
            }
        ),
    )
    assert chunks(events) == [(ANSWER, "A")]
    assert [e for e in events if isinstance(e, Usage)] == [Usage(2000, 4, 1, None)]
    assert any(isinstance(e, EngineReport) for e in events)
    assert events[-1] == Finished(2000, "limit")


# --- answers not streamed ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "obj", "want"),
    [
        (
            "openai-chat",
            {
                "choices": [
                    {
                        "message": {
                            "reasoning_content": "r",
                            "content": "a",
                            "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                        },
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 2, "completion_tokens": 3},
            },
            [(REASONING, "r"), (ANSWER, "a"), (TOOL, "f("), (TOOL, "{}"), (TOOL, ")")],
        ),
        (
            "openai-responses",
            {
                "status": "completed",
                "output": [
                    {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "r"}]},
                    {"type": "message", "content": [{"type": "output_text", "text": "a"}]},
                ],
                "usage": {"input_tokens": 2, "output_tokens": 3},
            },
            [(REASONING, "r"), (ANSWER, "a")],
        ),
        (
            "anthropic",
            {
                "content": [
                    {"type": "thinking", "thinking": "r"},
                    {"type": "text", "text": "a"},
                    {"type": "tool_use", "name": "g", "input": {"k": "v"}},
                ],
                "usage": {"input_tokens": 2, "output_tokens": 3},
                "stop_reason": "tool_use",
            },
            [(REASONING, "r"), (ANSWER, "a"), (TOOL, "g("), (TOOL, '{"k": "v"}'), (TOOL, ")")],
        ),
        ("embeddings", {"data": [{"embedding": [0.1]}], "usage": {"prompt_tokens": 2}}, []),
    ],
)
def test_whole_answers(dialect: str, obj: dict[str, Any], want: list[tuple[str, str]]) -> None:
    events: list[StreamEvent] = []
    whole_answer(dialect, obj, 5, events.append)
    assert chunks(events) == want
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage and usage[0].prompt_tokens == 2
    assert isinstance(events[-1], Finished)


# --- the metrics of a reasoning answer --------------------------------------------------


def timeline_of(events: list[StreamEvent], t0: int = 0) -> RequestTimeline:
    from tui.core.events import RequestSent

    tl = RequestTimeline()
    tl.add(RequestSent(t0))
    for e in events:
        tl.add(e)
    return tl


def test_ttfo_thinking_time_and_the_reasoning_split() -> None:
    ms = 1_000_000
    events: list[StreamEvent] = [
        TextChunk(100 * ms, "a", 1, REASONING),
        TextChunk(110 * ms, "b", 1, REASONING),
        TextChunk(120 * ms, "c", 1, REASONING),
        TextChunk(200 * ms, "x", 1, ANSWER),
        TextChunk(250 * ms, "y", 1, ANSWER),
        Usage(250 * ms, 10, 5, None),
        Finished(260 * ms, "stop"),
    ]
    m = compute_metrics(timeline_of(events))
    assert m.ttft_ms == 100 and m.ttfo_ms == 200
    assert m.thinking_ms == 100  # first answer − first reasoning
    assert (m.reasoning_tokens, m.reasoning_tokens_source) == (3, "engine-chunks")
    assert m.answer_tokens == 2 and not m.answer_tokens_estimated
    assert m.reasoning_tps == pytest.approx(2 / 0.020)
    assert m.answer_tps == pytest.approx(1 / 0.050)
    assert m.decode_tps == pytest.approx(4 / 0.150)  # every token, as before


def test_reasoning_counted_by_the_engine_wins_and_chunk_counts_are_estimates() -> None:
    ms = 1_000_000
    base: list[StreamEvent] = [
        TextChunk(10 * ms, "a", None, REASONING),
        TextChunk(20 * ms, "b", None, REASONING),
        TextChunk(30 * ms, "x", None, ANSWER),
        Finished(40 * ms, "stop"),
    ]
    est = compute_metrics(timeline_of([*base, Usage(40 * ms, 1, 10, None)]))
    assert (est.reasoning_tokens, est.reasoning_tokens_source) == (2, "chunk-count-estimate")
    assert est.answer_tokens == 8 and est.answer_tokens_estimated
    told = compute_metrics(timeline_of([*base, Usage(40 * ms, 1, 10, 7)]))
    assert (told.reasoning_tokens, told.reasoning_tokens_source) == (7, "usage")
    assert told.answer_tokens == 3 and not told.answer_tokens_estimated


def test_without_reasoning_ttfo_is_ttft() -> None:
    ms = 1_000_000
    m = compute_metrics(
        timeline_of([TextChunk(5 * ms, "x", 1), TextChunk(9 * ms, "y", 1), Finished(9 * ms)])
    )
    assert m.ttfo_ms == m.ttft_ms == 5
    assert m.reasoning_tokens is None and m.thinking_ms is None and m.answer_tokens == 2


def test_a_tool_call_ends_the_thinking() -> None:
    ms = 1_000_000
    m = compute_metrics(
        timeline_of(
            [
                TextChunk(5 * ms, "r", None, REASONING),
                TextChunk(30 * ms, "f(", None, TOOL),
                Finished(40 * ms, "tool_calls"),
            ]
        )
    )
    assert m.ttft_ms == 5 and m.ttfo_ms == 30 and m.thinking_ms == 25


def test_a_timeline_with_parts_survives_its_dict() -> None:
    tl = timeline_of([TextChunk(5, "r", None, REASONING), TextChunk(6, "a", 1), Usage(7, 1, 2, 1)])
    back = RequestTimeline.from_dict(tl.to_dict())
    assert back.chunk_part == [REASONING, ANSWER]
    assert back.reasoning_text == "r" and back.text == "a"
    assert back.usage_reasoning_tokens == 1
