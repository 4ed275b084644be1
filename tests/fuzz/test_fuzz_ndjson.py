"""Fuzzing NDJSON as the Ollama engine reads it: NDJSONDecoder (tui/transport/sse.py) cuts
lines, OllamaDecoder (tui/engines/dialects/ollama.py) turns each into events.

Generated: (1) streams of Ollama /api/chat and /api/generate objects (text, thinking,
errors, the ``done: true`` line with its counts and durations), whose fields take hostile
values too: huge and negative integers, NaN and Infinity, subnormal floats, strings,
lists, nested objects; serialized with varied separators, ASCII or UTF-8, lines ended by
LF or CRLF, blank lines between, the last line sometimes unterminated; (2) single lines
with one targeted corruption: cut short, a byte inserted or replaced, wrapped in an array,
nested thousands deep; (3) random bytes. Streams are fed whole and in random pieces.

Asserted: the decoder gives exactly the written lines in any pieces; OllamaDecoder raises
nothing but StreamProtocolError (its message quotes the line) and StreamServerError (for
an ``error`` line); the text it emits is the lines' thinking then content (or response);
the done line's counts and durations are plain numbers or None, and the request's
metrics compute from the events without raising.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings

from tests.fuzz.fuzz_support import FUZZ, MIN_CASES, SEEDS, CaseCount, pieces
from tui.core.events import EngineReport, Finished, RequestSent, StreamEvent, TextChunk
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.dialects import decoder_for
from tui.engines.dialects.errors import StreamProtocolError, StreamServerError
from tui.transport.sse import EventTooLarge, NDJSONDecoder

SPLITS = 7
TEXTS: list[Any] = ["", "Hel", "lo", " wörld", "日本", "\n", "\ud800", '"}', 5, None, ["x"], {}]
NUMBERS: list[Any] = [
    0, 1, 12, 5_000_000, -3, 10**400, 2**63, 1.5, 1e-316, -0.0, float("nan"),
    float("inf"), "12", True, None, [1], {"a": 1},
]  # fmt: skip
DURATIONS = ["total_duration", "load_duration", "prompt_eval_duration", "eval_duration"]


def ollama_object(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["chat", "chat", "chat", "generate", "done", "error", "other"])
    if kind == "chat":
        msg: dict[str, Any] = {"role": "assistant", "content": rng.choice(TEXTS)}
        if rng.random() < 0.3:
            msg["thinking"] = rng.choice(TEXTS)
        return {"model": "m", "message": rng.choice([msg, msg, msg, "x", None]), "done": False}
    if kind == "generate":
        return {"response": rng.choice(TEXTS), "done": rng.choice([False, "true", 0])}
    if kind == "error":
        return {"error": rng.choice(["model gone", "", 0, ["a"], {"b": "c"}])}
    if kind == "other":
        return {rng.choice(["x", "done_reason", "done"]): rng.choice(NUMBERS)}
    final: dict[str, Any] = {"done": True, "done_reason": rng.choice(["stop", "length", 7])}
    for key in ["prompt_eval_count", "eval_count", *DURATIONS]:
        if rng.random() < 0.8:
            final[key] = rng.choice(NUMBERS) if rng.random() < 0.4 else rng.randint(0, 10**10)
    return final


def serialize(obj: dict[str, Any], rng: random.Random) -> str:
    seps = rng.choice([(",", ":"), (", ", ": "), (" ,", " : ")])
    text = json.dumps(obj, separators=seps, ensure_ascii=rng.random() < 0.5)
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: a server can only send it escaped
        text = json.dumps(obj, separators=seps)
    return text


def expected_text(obj: dict[str, Any]) -> str:
    msg = obj.get("message")
    if isinstance(msg, dict):
        parts = [msg.get("thinking"), msg.get("content")]
    else:
        parts = [obj.get("response")]
    return "".join(p for p in parts if isinstance(p, str))


def read_all(lines: list[str]) -> tuple[list[StreamEvent], Exception | None]:
    """The decoder over the lines as the engine does (stopping at the done line, then
    flushing what it held); any exception but the module's own fails the test here."""
    events: list[StreamEvent] = []
    dec = decoder_for("ollama")
    try:
        for t, line in enumerate(lines, 1):
            dec.payload(line, t * 1000, events.append)
            if dec.complete:
                break
        dec.flush(10**6, events.append)
    except (StreamProtocolError, StreamServerError) as e:
        return events, e
    return events, None


def check_metrics(events: list[StreamEvent]) -> None:
    tl = RequestTimeline()
    tl.add(RequestSent(0))
    for ev in events:
        tl.add(ev)
    tl.add(Finished(10**9, "stop"))
    compute_metrics(tl)  # raises nothing
    for ev in events:
        if isinstance(ev, EngineReport):
            t = ev.truth
            for ms in (t.prompt_ms, t.decode_ms, t.load_ms):
                assert ms is None or (isinstance(ms, float) and 0 <= ms < math.inf)
            for n in (t.prompt_eval_tokens, t.decode_tokens):
                assert n is None or (type(n) is int and 0 <= n < 2**63)
            assert t.prefill_tps is None or t.prefill_tps >= 0
            assert t.decode_tps is None or t.decode_tps >= 0


def test_streams_give_their_lines_in_any_pieces_and_events_without_surprise() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        objs = [ollama_object(rng) for _ in range(rng.randint(1, 8))]
        lines = [serialize(o, rng) for o in objs]
        stream = b""
        for line in lines:
            stream += rng.choice([b"", b"", b"\n", b" \r\n"]) + line.encode()
            stream += rng.choice([b"\n", b"\n", b"\r\n"])
        if rng.random() < 0.3:
            stream = stream.rstrip(b"\r\n")  # no newline after the last line
        for i in range(SPLITS + 1):
            parts = [stream] if i == 0 else pieces(stream, rng)
            d = NDJSONDecoder()
            got = [ln for part in parts for ln in d.feed(part)]
            rest = d.close()
            assert got + ([rest] if rest else []) == lines, parts
            cases.add()
        events, error = read_all(lines)
        if error is not None:  # every line is JSON: only an "error" line may fail
            assert isinstance(error, StreamServerError), (lines, error)
            assert str(error).startswith("server error: ")
            return
        texts = [ev.text for ev in events if isinstance(ev, TextChunk)]
        done = next((k for k, o in enumerate(objs) if o.get("done") is True), len(objs))
        want = [expected_text(o) for o in objs[: done + 1]]
        assert "".join(texts) == "".join(want), (lines, texts)
        check_metrics(events)

    run()
    assert cases.n >= MIN_CASES


def corrupt(line: str, rng: random.Random) -> str:
    kind = rng.choice(["cut", "insert", "replace", "array", "deep", "prefix"])
    at = rng.randrange(len(line) + 1)
    if kind == "cut":
        return line[: rng.randrange(len(line))]
    if kind == "insert":
        return line[:at] + rng.choice('{}[]":,\\x0 \x00é') + line[at:]
    if kind == "replace":
        return line[:at] + rng.choice('{}[]":,\\x0') + line[at + 1 :]
    if kind == "array":
        return "[" + line + "]"
    if kind == "deep":
        return "[" * rng.choice([10, 5000, 100_000]) + line
    return rng.choice(["data: ", "\ufeff", "}"]) + line


def test_corrupted_lines_are_refused_by_name_or_read() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        line = serialize(ollama_object(rng), rng)
        for _ in range(8):
            bad = corrupt(line, rng)
            try:
                obj = json.loads(bad)
            except (ValueError, RecursionError):
                obj = None
            events, error = read_all([bad])
            if isinstance(obj, dict):  # the corruption left a JSON object
                assert error is None or isinstance(error, StreamServerError), (bad, error)
            else:
                assert isinstance(error, StreamProtocolError), (bad, error)
                assert repr(bad[:120]) in str(error)
            cases.add()

    run()
    assert cases.n >= MIN_CASES


SYNTAX = [b"{", b"}", b'"', b":", b",", b"\n", b"\r\n", b"[", b"]", b" ", b"1", b'"done"']
SYNTAX += [b"true", b'"message"', b'"content"', b'"error"', b"\xff", b"\xc3\xa9", b"NaN"]


def test_random_bytes_are_lines_or_named_protocol_errors() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        if rng.random() < 0.3:
            stream = rng.randbytes(rng.randint(0, 60))
        else:
            stream = b"".join(rng.choices(SYNTAX, k=rng.randint(0, 40)))
        d = NDJSONDecoder()
        whole = d.feed(stream) + [d.close()]
        for i in range(SPLITS + 1):
            parts = [stream] if i == 0 else pieces(stream, rng)
            d = NDJSONDecoder()
            got = [ln for part in parts for ln in d.feed(part)] + [d.close()]
            assert got == whole, parts
            cases.add()
        lines = [ln for ln in whole if ln]
        _, error = read_all(lines)
        if isinstance(error, StreamProtocolError):
            assert any(repr(ln[:120]) in str(error) for ln in lines)

    run()
    assert cases.n >= MIN_CASES


def test_the_line_cap_bounds_memory_and_refuses_only_what_passes_it() -> None:
    """tui/transport/sse.py's EVENT_LIMIT for NDJSON, at a small limit: after every feed
    at most ``limit`` bytes of an unfinished line are held; lines that fit (the longest
    one, terminator included) come out as written in any pieces; a line that never ends
    is refused (EventTooLarge) once it passes the limit."""
    cases = CaseCount()

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        lines = [serialize(ollama_object(rng), rng) for _ in range(rng.randint(1, 6))]
        stream = b"".join(ln.encode() + rng.choice([b"\n", b"\r\n"]) for ln in lines)
        fits = max(len(ln.encode()) for ln in lines) + 2
        for _ in range(SPLITS):
            parts = pieces(stream, rng)
            d = NDJSONDecoder(limit=fits)
            assert [ln for part in parts for ln in d.feed(part)] == lines, parts
            assert d.close() == ""
            cases.add()
        limit = rng.randint(4, 64)
        d = NDJSONDecoder(limit=limit)
        with pytest.raises(EventTooLarge):
            for part in pieces(stream + b"{" * (limit + 1), rng):
                d.feed(part)
                assert d.pending <= limit
        cases.add()

    run()
    assert cases.n >= MIN_CASES
