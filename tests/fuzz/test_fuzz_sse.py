"""Fuzzing the SSE decoder (tui/transport/sse.py) against a reference decoder.

Generated: (1) structure-aware streams: events of ``data``/``event``/``id``/``retry``/
unknown fields, comments and colon-less lines, values with multi-byte and broken UTF-8,
NUL and colons, each line ended by LF, CRLF or CR, dispatched by one or more blank lines,
the last event sometimes unfinished (no blank line, no line end); (2) random bytes, drawn
mostly from SSE's own syntax. Each stream is fed whole and in random pieces (empty ones
too, one byte at a time now and then), through ``feed`` and through the fast path
``feed_payloads``.

Asserted: the decoder never raises; ``feed`` + ``close`` give exactly the events of a
reference decoder written from the WHATWG event-stream algorithm (plus the unfinished
last event, which ``close`` documents it returns); ``feed_payloads`` gives the same data;
so any split of a stream gives what the whole stream gives.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings

from tests.fuzz.fuzz_support import FUZZ, MIN_CASES, SEEDS, CaseCount, pieces
from tui.transport.sse import EventTooLarge, SSEDecoder, SSEEvent

SPLITS = 9  # random splittings per stream, for each of feed and feed_payloads

FIELDS = [b"data", b"data", b"data", b"event", b"id", b"retry", b"foo", b"DATA", b""]
VALUES = [
    b"", b"x", b" ", b"[DONE]", b'{"a": 1}', b"caf\xc3\xa9", b"\xe6\x97\xa5", b"\xe6\x97",
    b"\xff", b"\x00", b"a:b", b": c", b"\xf0\x9f\x98\x80", b"data: inner",
]  # fmt: skip
ENDS = [b"\n", b"\n", b"\r\n", b"\r"]
SYNTAX = [b"data", b":", b" ", b"\n", b"\r", b"\r\n", b"event", b"id", b"x", b"\xc3", b"\xa9"]


def reference(stream: bytes) -> list[SSEEvent]:
    """The WHATWG algorithm, plainly: decode, split lines, process each, then (as the
    decoder documents) dispatch an unfinished last event."""
    lines = re.split(r"\r\n|\r|\n", stream.decode("utf-8", "replace"))
    rest = lines.pop()
    data: list[str] | None = None
    event, last_id, out = "", None, []
    for line in [*lines, rest, ""] if rest else [*lines, ""]:
        if line == "":
            if data is not None:
                out.append(SSEEvent("\n".join(data), event or "message", last_id))
            data, event = None, ""
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        value = value[1:] if sep and value.startswith(" ") else value
        if name == "data":
            data = [*(data or []), value]
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
    return out


def structured_stream(rng: random.Random) -> bytes:
    out = []
    for _ in range(rng.randint(0, 6)):
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.1:
                line = b":" + rng.choice(VALUES)  # a comment
            elif rng.random() < 0.1:
                line = rng.choice(FIELDS)  # a field without a colon
            else:
                sep = rng.choice([b": ", b": ", b":", b":  "])
                line = rng.choice(FIELDS) + sep + b"".join(rng.choices(VALUES, k=2))
            out.append(line + rng.choice(ENDS))
        out.append(rng.choice(ENDS) * rng.choice([1, 1, 1, 2]))  # the dispatching blank line
    if out and rng.random() < 0.3:  # an unfinished last event
        out[-1] = b""
        if rng.random() < 0.5:
            out[-2] = out[-2].rstrip(b"\r\n")
    return b"".join(out)


def random_stream(rng: random.Random) -> bytes:
    if rng.random() < 0.3:
        return rng.randbytes(rng.randint(0, 60))
    return b"".join(rng.choices(SYNTAX, k=rng.randint(0, 40)))


def check(stream: bytes, rng: random.Random, cases: CaseCount) -> None:
    want = reference(stream)
    want_data = [ev.data for ev in want]
    for i in range(SPLITS + 1):
        parts = [stream] if i == 0 else pieces(stream, rng)
        d = SSEDecoder()
        got = [ev for part in parts for ev in d.feed(part)] + d.close()
        assert got == want, parts
        d = SSEDecoder()
        data = [p.decode("utf-8", "replace") for part in parts for p in d.feed_payloads(part)]
        assert data + [ev.data for ev in d.close()] == want_data, parts
        cases.add(2)


def test_structured_streams_decode_as_the_reference_does_in_any_pieces() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=520)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        check(structured_stream(rng), rng, cases)

    run()
    assert cases.n >= MIN_CASES


def test_random_bytes_decode_as_the_reference_does_in_any_pieces() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=520)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        check(random_stream(rng), rng, cases)

    run()
    assert cases.n >= MIN_CASES


def longest_event(stream: bytes) -> int:
    """Bytes of the longest run of non-empty lines (terminators counted): what one event,
    unfinished or not, can make the decoder hold."""
    best = run = 0
    for line in re.split(rb"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", stream):
        if line.strip(b"\r\n"):
            run += len(line)
            best = max(best, run)
        elif line:
            run = 0
    return best


def test_the_event_cap_bounds_memory_and_refuses_only_what_passes_it() -> None:
    """tui/transport/sse.py's EVENT_LIMIT, at a small limit: after every feed the decoder
    holds at most ``limit`` bytes of an unfinished event; a stream whose events all fit
    (with 2 bytes to spare) decodes as the reference does, in any pieces; an event that
    never ends is refused (EventTooLarge) once it passes the limit."""
    cases = CaseCount()

    @settings(FUZZ, max_examples=850)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        stream = structured_stream(rng) if rng.random() < 0.7 else random_stream(rng)
        fits = longest_event(stream) + 2
        want = [ev.data for ev in reference(stream)]
        for _ in range(4):
            parts = pieces(stream, rng)
            d = SSEDecoder(limit=fits)
            got = [p.decode("utf-8", "replace") for part in parts for p in d.feed_payloads(part)]
            assert got + [ev.data for ev in d.close()] == want, parts
            limit = rng.randint(4, 64)
            endless = stream + b"\n\ndata: " + b"x" * (limit + 1)
            for feed in ("feed", "feed_payloads"):
                d = SSEDecoder(limit=limit)
                with pytest.raises(EventTooLarge):
                    for part in pieces(endless, rng):
                        getattr(d, feed)(part)
                        assert d.pending <= limit
                cases.add(1)
            cases.add(1)

    run()
    assert cases.n >= MIN_CASES
