"""Every event kind each decoder recognises, one row each: what the kind's payload
becomes (issue 49: a decoder change that drops or mis-stamps a kind fails here).

A row is (dialect, the kind's name, the reads, then what comes out): the text chunks as
(part, text, tokens, stamp), and for kinds that carry no text, the counts, the finish
reason or the error they give. The reads are stamped 1000, 2000, ... in order, so a
chunk's stamp says which read its text is dated from (held ``<think>`` text and tags cut
across reads included). Shapes are the APIs' own (tests/data/streams; the Responses and
Messages API references).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tui.core.events import (
    ANSWER,
    REASONING,
    TOOL,
    EngineReport,
    Finished,
    StreamEvent,
    TextChunk,
    Usage,
)
from tui.engines.dialects import decoder_for
from tui.engines.dialects.errors import StreamServerError
from tui.engines.dialects.responses import _END, _REASONING

Chunk = tuple[str, str, int | None, int]


def sse(obj: Any) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj)
    return b"data: " + data.encode() + b"\n\n"


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def delta(d: dict[str, Any], finish: str | None = None) -> bytes:
    return sse({"choices": [{"index": 0, "delta": d, "finish_reason": finish}]})


def counted(text: str, total: int) -> bytes:
    """A chat chunk with vLLM's continuous usage: ``total`` tokens so far."""
    return sse({"choices": [{"delta": {"content": text}}], "usage": {"completion_tokens": total}})


def ev(kind: str, **fields: Any) -> bytes:
    return sse({"type": kind, **fields})


@dataclass
class Row:
    dialect: str
    kind: str
    reads: list[bytes]
    chunks: list[Chunk] = field(default_factory=list)
    usage: tuple[int | None, int | None, int | None] | None = None  # prompt, output, reasoning
    reason: str | None = None  # the finish reason, where the kind gives one
    error: str | None = None  # the server's error the kind raises
    report: bool = False  # the kind gives the engine's report


ROWS = [
    # --- OpenAI chat ------------------------------------------------------------------
    Row("openai-chat", "delta.content", [delta({"content": "Hi"})], [(ANSWER, "Hi", None, 1000)]),
    Row(
        "openai-chat",
        "delta.reasoning_content",
        [delta({"reasoning_content": "hm"})],
        [(REASONING, "hm", None, 1000)],
    ),
    Row(
        "openai-chat",
        "delta.reasoning",
        [delta({"reasoning": "hm"})],
        [(REASONING, "hm", None, 1000)],
    ),
    Row("openai-chat", "delta.role alone", [delta({"role": "assistant", "content": ""})]),
    Row(
        "openai-chat",
        "delta.tool_calls",
        [
            delta({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": ""}}]}),
            delta({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
        ],
        [(TOOL, "f(", None, 1000), (TOOL, "{}", None, 2000), (TOOL, ")", 0, 2000)],
    ),
    Row(
        "openai-chat",
        "delta.function_call",
        [delta({"function_call": {"name": "g", "arguments": "{}"}})],
        [(TOOL, "g(", None, 1000), (TOOL, "{}", None, 1000), (TOOL, ")", 0, 1000)],
    ),
    Row("openai-chat", "choices.finish_reason", [delta({}, "length")], reason="length"),
    Row("openai-chat", "[DONE]", [sse("[DONE]")], reason="stop"),
    Row(
        "openai-chat",
        "usage (choices null)",
        [
            sse(
                {
                    "choices": None,
                    "usage": {
                        "prompt_tokens": 4,
                        "completion_tokens": 9,
                        "completion_tokens_details": {"reasoning_tokens": 5},
                    },
                }
            )
        ],
        usage=(4, 9, 5),
    ),
    Row(
        "openai-chat",
        "usage per chunk (continuous)",
        [counted("a", 1), counted("bc", 3)],
        [(ANSWER, "a", 1, 1000), (ANSWER, "bc", 2, 2000)],
        usage=(None, 3, None),
    ),
    Row(
        "openai-chat",
        "timings",
        [sse({"choices": [], "timings": {"prompt_n": 3, "prompt_ms": 1.0}})],
        usage=(3, None, None),  # the engine's count, where the client asked for no usage
        report=True,
    ),
    Row("openai-chat", "error", [sse({"error": {"message": "overloaded"}})], error="overloaded"),
    Row(
        "openai-chat",
        "<think> in content, tags whole",
        [delta({"content": "<think>r</think>a"})],
        [(REASONING, "r", None, 1000), (ANSWER, "a", None, 1000)],
    ),
    Row(
        "openai-chat",
        "<think> in content, tags in pieces",
        [
            delta({"content": "\n<th"}),
            delta({"content": "ink>"}),
            delta({"content": "r1"}),
            delta({"content": " r2</"}),
            delta({"content": "think>"}),
            delta({"content": "\n"}),
            delta({"content": "a"}),
        ],
        # reasoning is dated from the read that brought its text, not the tag's; the
        # answer from its own read (the blank after the tag is no text)
        [(REASONING, "r1", None, 3000), (REASONING, " r2", None, 4000), (ANSWER, "a", None, 7000)],
    ),
    Row(
        "openai-chat",
        "<think> text held as a close tag's start, then not one",
        [delta({"content": "<think>r<"}), delta({"content": "x</think>a"})],
        # "<x" is dated from the read that brought its "<"
        [(REASONING, "r", None, 1000), (REASONING, "<x", None, 1000), (ANSWER, "a", None, 2000)],
    ),
    Row(
        "openai-chat",
        "<think> text held as a close tag's start over two reads, then not one",
        [
            delta({"content": "<think>r<"}),
            delta({"content": "/"}),
            delta({"content": "x</think>a"}),
        ],
        [(REASONING, "r", None, 1000), (REASONING, "</x", None, 1000), (ANSWER, "a", None, 3000)],
    ),
    Row(
        "openai-chat",
        "reasoning and content in one counted delta",
        [
            sse(
                {
                    "choices": [{"delta": {"reasoning_content": "r", "content": "a"}}],
                    "usage": {"completion_tokens": 2},
                }
            )
        ],
        # the chunk's count goes to its first piece, once
        [(REASONING, "r", 2, 1000), (ANSWER, "a", 0, 1000)],
        usage=(None, 2, None),
    ),
    Row(
        "openai-chat",
        "<think> in pieces, per-chunk counts",
        [counted("<th", 1), counted("ink>r", 3), counted("</think>", 4), counted("a", 5)],
        # a tag's tokens move to the next text: the counts still add up to the engine's
        [(REASONING, "r", 3, 2000), (ANSWER, "a", 2, 4000)],
        usage=(None, 5, None),
    ),
    Row(
        "openai-chat",
        "text held as a tag's start, then not a tag",
        [delta({"content": "  <"}), delta({"content": "b>"})],
        [(ANSWER, "  <b>", None, 1000)],
    ),
    # --- OpenAI completions -----------------------------------------------------------
    Row(
        "openai-completions",
        "choices.text",
        [sse({"choices": [{"text": "Hi", "finish_reason": None}]})],
        [(ANSWER, "Hi", None, 1000)],
    ),
    Row(
        "openai-completions",
        "choices.finish_reason",
        [sse({"choices": [{"text": "", "finish_reason": "stop"}]})],
        reason="stop",
    ),
    # --- the Responses API ------------------------------------------------------------
    Row(
        "openai-responses",
        "response.output_text.delta",
        [ev("response.output_text.delta", delta="Hi")],
        [(ANSWER, "Hi", None, 1000)],
    ),
    Row(
        "openai-responses",
        "response.reasoning_text.delta",
        [ev("response.reasoning_text.delta", delta="hm")],
        [(REASONING, "hm", None, 1000)],
    ),
    Row(
        "openai-responses",
        "response.reasoning_summary_text.delta",
        [ev("response.reasoning_summary_text.delta", delta="hm")],
        [(REASONING, "hm", None, 1000)],
    ),
    Row(
        "openai-responses",
        "response.reasoning.delta",
        [ev("response.reasoning.delta", delta="hm")],
        [(REASONING, "hm", None, 1000)],
    ),
    Row(
        "openai-responses",
        "response.output_item.added",
        [ev("response.output_item.added", item={"type": "function_call", "name": "f"})],
        [(TOOL, "f(", None, 1000), (TOOL, ")", 0, 1000)],  # closed at the body's end
    ),
    Row(
        "openai-responses",
        "response.function_call_arguments.delta",
        [
            ev("response.output_item.added", item={"type": "function_call", "name": "f"}),
            ev("response.function_call_arguments.delta", delta="{}"),
        ],
        [(TOOL, "f(", None, 1000), (TOOL, "{}", None, 2000), (TOOL, ")", 0, 2000)],
    ),
    Row(
        "openai-responses",
        "response.output_item.done",
        [
            ev("response.output_item.added", item={"type": "function_call", "name": "f"}),
            ev("response.output_item.done", item={"type": "function_call", "name": "f"}),
            ev("response.output_text.delta", delta="ok"),
        ],
        # the call ends with its item, not when the next text comes
        [(TOOL, "f(", None, 1000), (TOOL, ")", 0, 2000), (ANSWER, "ok", None, 3000)],
    ),
    Row(
        "openai-responses",
        "response.completed",
        [
            ev(
                "response.completed",
                response={
                    "usage": {
                        "input_tokens": 4,
                        "output_tokens": 9,
                        "output_tokens_details": {"reasoning_tokens": 5},
                    }
                },
            )
        ],
        usage=(4, 9, 5),
        reason="stop",
    ),
    Row(
        "openai-responses",
        "response.incomplete",
        [
            ev(
                "response.incomplete",
                response={"incomplete_details": {"reason": "max_output_tokens"}},
            )
        ],
        reason="length",
    ),
    Row(
        "openai-responses",
        "response.completed with timings",
        [ev("response.completed", response={}, timings={"prompt_n": 3, "prompt_ms": 1.0})],
        usage=(3, None, None),
        reason="stop",
        report=True,
    ),
    Row(
        "openai-responses",
        "response.failed",
        [ev("response.failed", response={"error": {"message": "no capacity"}})],
        error="no capacity",
    ),
    Row("openai-responses", "error", [ev("error", message="bad")], error="bad"),
    Row(
        "openai-responses", "response.output_text.done", [ev("response.output_text.done", text="x")]
    ),
    Row("openai-responses", "response.created", [ev("response.created", response={})]),
    Row("openai-responses", "[DONE]", [sse("[DONE]")], reason="stop"),
    # --- Anthropic Messages -----------------------------------------------------------
    Row(
        "anthropic",
        "text_delta",
        [ev("content_block_delta", delta={"type": "text_delta", "text": "Hi"})],
        [(ANSWER, "Hi", None, 1000)],
    ),
    Row(
        "anthropic",
        "thinking_delta",
        [ev("content_block_delta", delta={"type": "thinking_delta", "thinking": "hm"})],
        [(REASONING, "hm", None, 1000)],
    ),
    Row(
        "anthropic",
        "signature_delta",
        [ev("content_block_delta", delta={"type": "signature_delta", "signature": "x"})],
    ),
    Row(
        "anthropic",
        "content_block_start tool_use, input_json_delta, content_block_stop",
        [
            ev("content_block_start", content_block={"type": "tool_use", "name": "f"}),
            ev("content_block_delta", delta={"type": "input_json_delta", "partial_json": "{}"}),
            ev("content_block_stop"),
            ev("content_block_delta", delta={"type": "text_delta", "text": "ok"}),
        ],
        # the call ends at its block's stop, not when the next text comes
        [
            (TOOL, "f(", None, 1000),
            (TOOL, "{}", None, 2000),
            (TOOL, ")", 0, 3000),
            (ANSWER, "ok", None, 4000),
        ],
    ),
    Row(
        "anthropic",
        "content_block_start server_tool_use",
        [
            ev("content_block_start", content_block={"type": "server_tool_use", "name": "w"}),
            ev("content_block_stop"),
        ],
        [(TOOL, "w(", None, 1000), (TOOL, ")", 0, 2000)],
    ),
    Row(
        "anthropic",
        "message_start usage",
        [
            ev(
                "message_start",
                message={"usage": {"input_tokens": 3, "cache_read_input_tokens": 2}},
            )
        ],
        usage=(5, None, None),
        report=True,  # the cached part of the prompt is the engine's account (issue 52)
    ),
    Row(
        "anthropic",
        "message_delta",
        [ev("message_delta", delta={"stop_reason": "max_tokens"}, usage={"output_tokens": 7})],
        usage=(None, 7, None),
        reason="length",
    ),
    Row("anthropic", "message_stop", [ev("message_stop")], reason="stop"),
    Row("anthropic", "ping", [ev("ping")]),
    Row("anthropic", "error", [ev("error", error={"message": "Overloaded"})], error="Overloaded"),
    # --- Ollama -----------------------------------------------------------------------
    Row(
        "ollama",
        "message.content",
        [line({"message": {"content": "Hi"}, "done": False})],
        [(ANSWER, "Hi", None, 1000)],
    ),
    Row(
        "ollama",
        "message.thinking",
        [line({"message": {"content": "", "thinking": "hm"}, "done": False})],
        [(REASONING, "hm", None, 1000)],
    ),
    Row(
        "ollama",
        "response (generate)",
        [line({"response": "Hi", "done": False})],
        [(ANSWER, "Hi", None, 1000)],
    ),
    Row(
        "ollama",
        "thinking (generate)",
        [line({"response": "", "thinking": "hm", "done": False})],
        [(REASONING, "hm", None, 1000)],
    ),
    Row(
        "ollama",
        "message.tool_calls",
        [line({"message": {"tool_calls": [{"function": {"name": "f", "arguments": {}}}]}})],
        [(TOOL, "f(", None, 1000), (TOOL, "{}", 0, 1000), (TOOL, ")", 0, 1000)],
    ),
    Row(
        "ollama",
        "done",
        [line({"done": True, "done_reason": "length", "prompt_eval_count": 3, "eval_count": 8})],
        usage=(3, 8, None),
        reason="length",
        report=True,
    ),
    Row("ollama", "error", [line({"error": "no model"})], error="no model"),
    # --- llama-server's /completion ---------------------------------------------------
    Row("llama", "content", [sse({"content": "Hi", "stop": False})], [(ANSWER, "Hi", None, 1000)]),
    Row(
        "llama",
        "stop",
        [
            sse(
                {
                    "content": "",
                    "stop": True,
                    "stop_type": "limit",
                    "tokens_evaluated": 4,
                    "tokens_predicted": 2,
                    "timings": {"prompt_n": 4, "prompt_ms": 1.0},
                }
            )
        ],
        usage=(4, 2, None),
        reason="limit",
        report=True,
    ),
    Row("llama", "error", [sse({"error": {"message": "busy"}})], error="busy"),
]


def run(row: Row) -> list[StreamEvent]:
    """The row's reads fed stamped 1000, 2000, ...; closed one after the last; the end."""
    from tui.engines.dialects.llama import timings_events

    dec = decoder_for(row.dialect)
    out: list[StreamEvent] = []
    t = 0
    for data in row.reads:
        t += 1000
        dec.feed(data, t, out.append)
    dec.close(t + 1, out.append)
    out += timings_events(dec, t + 1)
    out.append(dec.end(t + 2))
    return out


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.dialect}: {r.kind}")
def test_each_event_kind(row: Row) -> None:
    if row.error is not None:
        with pytest.raises(StreamServerError, match=row.error):
            run(row)
        return
    out = run(row)
    chunks = [(e.part, e.text, e.tokens, e.t_ns) for e in out if isinstance(e, TextChunk)]
    assert chunks == row.chunks
    usage = [
        (u.prompt_tokens, u.output_tokens, u.reasoning_tokens) for u in out if isinstance(u, Usage)
    ]
    assert usage == ([] if row.usage is None else [row.usage])
    assert any(isinstance(e, EngineReport) for e in out) == row.report
    end = out[-1]
    if row.reason is not None:
        assert isinstance(end, Finished) and end.reason == row.reason


def test_the_table_names_every_kind_the_responses_decoder_lists() -> None:
    """A kind added to the Responses decoder's sets without a row fails here."""
    named = {r.kind.split(" ")[0] for r in ROWS if r.dialect == "openai-responses"}
    assert set(_REASONING) | set(_END) <= named
