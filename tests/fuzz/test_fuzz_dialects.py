"""Fuzzing the wire-format decoders (tui/engines/dialects) with hostile streams.

Generated per dialect (OpenAI chat and completions, the Responses API, Anthropic Messages,
llama-server's /completion, Ollama): streams of the API's own event shapes whose fields
take hostile values — wrong types (lists, objects, numbers where text goes and the
reverse), huge and negative counts, NaN, unknown event types, ``<think>`` tags and their
pieces in answer text, tool calls without names or indexes — now and then a corrupted
payload (cut short, not an object, nested thousands deep), fed whole and in random pieces;
and answers read whole from the same hostile shapes.

Asserted: a decoder raises nothing but StreamProtocolError, StreamServerError and
EventTooLarge; every chunk it emits has text (a str), a part of the three, and a token
count that is None or a whole number ≥ 0; the counts in Usage are None or whole numbers
0 ≤ n < 2**53; the request's metrics compute from the events without raising; the text is
the same however the bytes were cut (each part's text, joined).
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings

from tests.fuzz.fuzz_support import FUZZ, MIN_CASES, SEEDS, CaseCount, pieces
from tui.core.events import PARTS, RequestSent, StreamEvent, TextChunk, Usage
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.dialects import decoder_for, whole_answer
from tui.engines.dialects.errors import StreamProtocolError, StreamServerError
from tui.engines.dialects.kinds import dialects
from tui.transport.sse import EventTooLarge

STREAMED = [d.name for d in dialects() if d.decoder is not None]

ALLOWED = (StreamProtocolError, StreamServerError, EventTooLarge)
TEXTS: list[Any] = [
    "", "a", " b", "日本", "<think>", "</think>", "<thi", "nk>", "</", "think>", "\n\n",
    "\x1b[31m", 5, None, ["x"], {"t": 1}, True,
]  # fmt: skip
COUNTS: list[Any] = [0, 1, 7, 10**400, 2**63, -3, 1.5, float("nan"), "9", None, True, [1]]


def pick(rng: random.Random, values: list[Any]) -> Any:
    return rng.choice(values)


def chat_payload(rng: random.Random) -> Any:
    delta: dict[str, Any] = {}
    for key in rng.sample(["content", "reasoning_content", "reasoning", "role"], rng.randint(0, 3)):
        delta[key] = pick(rng, TEXTS)
    if rng.random() < 0.3:
        fn = {"name": pick(rng, TEXTS), "arguments": pick(rng, TEXTS)}
        call = {"index": pick(rng, [0, 1, None, "x"]), "function": rng.choice([fn, "x", None])}
        delta["tool_calls"] = rng.choice([[call], call, None, [5]])
    if rng.random() < 0.05:
        delta["function_call"] = {"name": pick(rng, TEXTS), "arguments": pick(rng, TEXTS)}
    choice = {"delta": rng.choice([delta, delta, "x", None]), "text": pick(rng, TEXTS)}
    if rng.random() < 0.1:
        choice["finish_reason"] = pick(rng, ["stop", "length", 3, None])
    obj: dict[str, Any] = {"choices": rng.choice([[choice], [choice], None, [], "x", {}])}
    if rng.random() < 0.15:
        obj["usage"] = {
            "prompt_tokens": pick(rng, COUNTS),
            "completion_tokens": pick(rng, COUNTS),
            "completion_tokens_details": rng.choice([{"reasoning_tokens": pick(rng, COUNTS)}, 3]),
        }
    if rng.random() < 0.02:
        obj["error"] = pick(rng, ["boom", {"message": "boom"}, 0])
    return obj


RESPONSES_TYPES = [
    "response.output_text.delta", "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
    "response.output_item.added", "response.output_item.done", "response.output_text.done",
    "response.completed", "response.incomplete", "response.created", "response.failed",
    "error", "mystery", 5,
]  # fmt: skip


def responses_payload(rng: random.Random) -> Any:
    kind = rng.choice(RESPONSES_TYPES)
    obj: dict[str, Any] = {"type": kind, "delta": pick(rng, TEXTS), "text": pick(rng, TEXTS)}
    if rng.random() < 0.5:
        obj["item"] = rng.choice(
            [{"type": "function_call", "name": pick(rng, TEXTS)}, {"type": "message"}, "x", None]
        )
    if kind in ("response.completed", "response.incomplete", "response.failed"):
        obj["response"] = rng.choice(
            [
                {
                    "usage": {
                        "input_tokens": pick(rng, COUNTS),
                        "output_tokens": pick(rng, COUNTS),
                        "output_tokens_details": {"reasoning_tokens": pick(rng, COUNTS)},
                    },
                    "incomplete_details": rng.choice([{"reason": pick(rng, TEXTS)}, None, 4]),
                    "error": rng.choice([{"message": "no"}, None]),
                },
                None,
                "x",
            ]
        )
    return obj


ANTHROPIC_TYPES = [
    "message_start", "content_block_start", "content_block_delta", "content_block_stop",
    "message_delta", "message_stop", "ping", "error", "mystery", None,
]  # fmt: skip


def anthropic_payload(rng: random.Random) -> Any:
    kind = rng.choice(ANTHROPIC_TYPES)
    usage = {
        "input_tokens": pick(rng, COUNTS),
        "output_tokens": pick(rng, COUNTS),
        "cache_read_input_tokens": pick(rng, COUNTS),
    }
    delta_kind = rng.choice(
        ["text_delta", "thinking_delta", "input_json_delta", "signature_delta", 0]
    )
    return {
        "type": kind,
        "message": rng.choice([{"usage": usage}, None, []]),
        "usage": rng.choice([usage, None, "x"]),
        "content_block": rng.choice(
            [{"type": "tool_use", "name": pick(rng, TEXTS)}, {"type": "text"}, 1]
        ),
        "delta": rng.choice(
            [
                {
                    "type": delta_kind,
                    "text": pick(rng, TEXTS),
                    "thinking": pick(rng, TEXTS),
                    "partial_json": pick(rng, TEXTS),
                    "stop_reason": pick(rng, ["end_turn", "max_tokens", "tool_use", 1, None]),
                },
                "x",
                None,
            ]
        ),
        "error": rng.choice([{"message": "Overloaded"}, None]),
    }


def ollama_payload(rng: random.Random) -> Any:
    msg = {
        "content": pick(rng, TEXTS),
        "thinking": pick(rng, TEXTS),
        "tool_calls": rng.choice(
            [
                [{"function": {"name": pick(rng, TEXTS), "arguments": {"a": pick(rng, TEXTS)}}}],
                "x",
                [3],
            ]
        ),
    }
    obj: dict[str, Any] = {
        "message": rng.choice([msg, msg, None, "x"]),
        "response": pick(rng, TEXTS),
    }
    if rng.random() < 0.15:
        obj.update(done=True, eval_count=pick(rng, COUNTS), eval_duration=pick(rng, COUNTS))
    return obj


def llama_payload(rng: random.Random) -> Any:
    obj: dict[str, Any] = {"content": pick(rng, TEXTS), "stop": rng.random() < 0.1}
    if obj["stop"]:
        obj.update(
            tokens_predicted=pick(rng, COUNTS),
            tokens_evaluated=pick(rng, COUNTS),
            timings=rng.choice(
                [{"prompt_n": pick(rng, COUNTS), "predicted_ms": pick(rng, COUNTS)}, 1]
            ),
        )
    return obj


MAKERS = {
    "openai-chat": chat_payload,
    "openai-completions": chat_payload,
    "openai-responses": responses_payload,
    "anthropic": anthropic_payload,
    "ollama": ollama_payload,
    "llama": llama_payload,
}


def corrupt(text: str, rng: random.Random) -> str:
    kind = rng.choice(["cut", "array", "deep", "junk"])
    if kind == "cut":
        return text[: rng.randrange(max(1, len(text)))]
    if kind == "array":
        return "[" + text + "]"
    if kind == "deep":
        return "[" * rng.choice([10, 5000, 100_000]) + text
    return rng.choice(["{", "nul", '"x"', "1e999"])


def encode(dialect: str, payloads: list[str], rng: random.Random) -> bytes:
    if dialect == "ollama":
        return b"".join(p.encode() + rng.choice([b"\n", b"\r\n"]) for p in payloads)
    out = b""
    for p in payloads:
        if rng.random() < 0.2:
            out += b"event: x\n"
        out += b"data: " + p.encode() + rng.choice([b"\n\n", b"\r\n\r\n"])
    return out


def decode(dialect: str, parts: list[bytes]) -> tuple[list[StreamEvent], BaseException | None]:
    dec = decoder_for(dialect)
    events: list[StreamEvent] = []
    try:
        for t, part in enumerate(parts, 1):
            dec.feed(part, t * 1000, events.append)
            if dec.complete:
                break
        dec.close(10**7, events.append)
        events.append(dec.end(10**7 + 1))
    except ALLOWED as e:
        return events, e
    return events, None


def check(events: list[StreamEvent]) -> None:
    for ev in events:
        if isinstance(ev, TextChunk):
            assert type(ev.text) is str and ev.part in PARTS
            assert ev.tokens is None or (type(ev.tokens) is int and ev.tokens >= 0), ev
        elif isinstance(ev, Usage):
            for n in (ev.prompt_tokens, ev.output_tokens, ev.reasoning_tokens):
                assert n is None or (type(n) is int and 0 <= n < 2**53), ev
    tl = RequestTimeline()
    tl.add(RequestSent(0))
    for ev in events:
        tl.add(ev)
    compute_metrics(tl)  # raises nothing


def texts(events: list[StreamEvent]) -> dict[str, str]:
    out = dict.fromkeys(PARTS, "")
    for ev in events:
        if isinstance(ev, TextChunk):
            out[ev.part] += ev.text
    return out


def test_hostile_streams_in_any_pieces() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=700)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        dialect = rng.choice(STREAMED)
        payloads = []
        for _ in range(rng.randint(1, 10)):
            text = json.dumps(MAKERS[dialect](rng))
            payloads.append(corrupt(text, rng) if rng.random() < 0.08 else text)
        if dialect.startswith("openai-c") and rng.random() < 0.3:
            payloads.append("[DONE]")
        stream = encode(dialect, payloads, rng)
        whole, error = decode(dialect, [stream])
        check(whole)
        for _ in range(4):
            got, err = decode(dialect, pieces(stream, rng))
            check(got)
            assert type(err) is type(error), (dialect, stream, err, error)
            if error is None:
                assert texts(got) == texts(whole), (dialect, stream)
            cases.add()
        cases.add()

    run()
    assert cases.n >= MIN_CASES // 4


def test_hostile_answers_read_whole() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=400)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        dialect = rng.choice([*STREAMED, "embeddings", "rerank"])
        obj = {
            "choices": [{"message": chat_payload(rng)["choices"], "text": pick(rng, TEXTS)}],
            "output": [
                {"type": "reasoning", "content": [{"text": pick(rng, TEXTS)}]},
                {"type": "function_call", "name": pick(rng, TEXTS), "arguments": pick(rng, TEXTS)},
                rng.choice([{"type": "message", "content": "x"}, 5]),
            ],
            "content": rng.choice(
                [[{"type": "tool_use", "name": 1, "input": {"a": [1] * 3}}], "x"]
            ),
            "usage": rng.choice([{"prompt_tokens": pick(rng, COUNTS)}, None]),
            "stop_reason": pick(rng, ["end_turn", 5, None]),
            "message": pick(rng, [{"content": pick(rng, TEXTS)}, None]),
            "done": rng.random() < 0.5,
            "eval_count": pick(rng, COUNTS),
            "prompt_eval_count": pick(rng, COUNTS),
        }
        events: list[StreamEvent] = []
        try:
            whole_answer(dialect, obj, 5, events.append)
        except ALLOWED:
            pass
        check(events)
        cases.add()

    run()
    assert cases.n >= 400
