"""Issue 48, items 1, 3 and 5, at the issue's scale: what a server's fields cost a client
that decodes them (tui/engines/dialects) and measures them (tui/core/metrics).

1. A per-chunk token count is never a list of that many numbers, and a count no chunk
   could carry is no count: 12,000,000, 30,000,000 and 2**53 − 1 tokens claimed for a
   two-character answer cost a few KiB and no time, and the answer reads "2 tokens,
   estimated" with the real gap as its ITL (main: +91 MiB, +229 MiB, MemoryError, and
   "ITL p50 0.00 ms").
3. 6 MB of blank text before a ``<think>`` costs the same per event from first to last
   (main: quadratic, 14.7 s for 1 MB in 16-character chunks, ~9 min for 6 MB); past
   BLANK_LIMIT blank characters, no tag is awaited.
5. A 1,000,000-key ``timings`` keeps its 11 documented numbers; a finish reason of a
   million characters keeps 40, an error message 300 (main: every key, every
   character).

Bounds are bytes traced by tracemalloc, and linearity told in one run
(tests/support/cost.py: the last segment of a loop against its first, in this thread's
CPU time): both hold on a busy machine and on a slower one. Each bound is stated beside
its assertion with what main measured.
"""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest

from tests.support.cost import segment_costs
from tests.support.hostile_answers import (
    DOCUMENTED_TIMINGS,
    blank_lead,
    fat_fields,
    inflated_counts,
    sse,
)
from tui.core.events import (
    ANSWER,
    REASONING,
    EngineReport,
    Finished,
    RequestSent,
    StreamEvent,
    TextChunk,
    Usage,
)
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.dialects import decoder_for
from tui.engines.dialects.fields import LLAMA_TIMINGS, WORD_CHARS
from tui.engines.dialects.llama import timings_events
from tui.engines.dialects.think import BLANK_LIMIT

MS = 1_000_000


def decode(events: list[bytes], dialect: str = "openai-chat") -> list[StreamEvent]:
    """Each SSE event a read of its own, stamped 1 ms apart; close; timings; end."""
    dec = decoder_for(dialect)
    out: list[StreamEvent] = []
    t = 0
    for data in events:
        t += MS
        dec.feed(data, t, out.append)
    dec.close(t, out.append)
    out += timings_events(dec, t)
    out.append(dec.end(t))
    return out


def timeline(events: list[StreamEvent]) -> RequestTimeline:
    tl = RequestTimeline()
    tl.add(RequestSent(0))
    for e in events:
        tl.add(e)
    return tl


# --- 1. counts a server inflates --------------------------------------------------------


@pytest.mark.parametrize("claimed", [12_000_000, 30_000_000, 2**53 - 1])
def test_an_inflated_per_chunk_count_is_no_count_and_costs_nothing(claimed: int) -> None:
    tracemalloc.start()
    cpu = time.thread_time()
    try:
        m = compute_metrics(timeline(decode(inflated_counts(claimed))))
        p50, p90 = m.itl_ms_p50, m.itl_ms_p90
        cpu = time.thread_time() - cpu
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # main: +91 MiB and +229 MiB kept (12 M, 30 M), MemoryError (2**53 − 1)
    assert peak < 256 * 1024, peak
    assert cpu < 0.5, cpu  # main: 0.2-0.6 s of CPU, then the proxy's 2-7 s stall; here ~1 ms
    # the right numbers: two chunks, counted as such and said to be an estimate; the
    # per-token ITL is the one gap (1 ms), not 1 ms spread over millions of tokens
    assert (m.output_tokens, m.output_tokens_source) == (2, "chunk-count-estimate")
    assert m.output_tokens_estimated and m.itl_token_estimated
    assert p50 == p90 == 1.0
    assert m.prompt_tokens == 3  # the prompt's count is not the stream's to judge


def test_counts_a_chunk_can_carry_are_kept_per_chunk() -> None:
    """vLLM's continuous usage, with speculative decoding's several tokens in a chunk:
    each chunk's rise is its count, and the ITL spreads each gap over its tokens."""
    events, total = [], 0
    for text, k in [("a", 1), ("bcd", 3), ("e", 1), ("fghij", 5)]:
        total += k
        usage = {"prompt_tokens": 3, "completion_tokens": total}
        events.append(sse({"choices": [{"delta": {"content": text}}], "usage": usage}))
    usage = {"prompt_tokens": 3, "completion_tokens": total}
    events += [sse({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": usage})]
    out = decode(events)
    assert [e.tokens for e in out if isinstance(e, TextChunk)] == [1, 3, 1, 5]
    m = compute_metrics(timeline(out))
    assert (m.output_tokens, m.output_tokens_source) == (10, "usage")
    assert not m.itl_token_estimated
    assert m.itl_token_ms == [1 / 3, 1.0, 1 / 5] and m.itl_token_weights == [3, 1, 5]


def test_a_count_given_only_at_the_end_is_the_engines() -> None:
    """A usage on the last chunk alone is not held to the bytes streamed: a reasoning
    model's hidden thinking is counted there and never streamed."""
    usage = {
        "prompt_tokens": 3,
        "completion_tokens": 5000,
        "completion_tokens_details": {"reasoning_tokens": 4998},
    }
    events = [
        sse({"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]}),
        sse({"choices": [], "usage": usage}),
    ]
    usage_events = [e for e in decode(events) if isinstance(e, Usage)]
    assert usage_events == [Usage(2 * MS, 3, 5000, 4998)]


# --- 3. blank text before a <think> -----------------------------------------------------


def test_six_megabytes_of_blank_text_cost_the_same_per_event_throughout() -> None:
    """375,000 SSE events of 16 spaces each: the last sixth costs what the first did
    (main's splitter took 14.7 s for the first sixth, growing with its square)."""
    dec = decoder_for("openai-chat")
    out: list[StreamEvent] = []
    events = blank_lead(6_000_000, 16)
    segment_costs(len(events), lambda i: dec.feed(events[i], i, out.append))
    dec.close(10**9, out.append)
    text = [e for e in out if isinstance(e, TextChunk)]
    # past BLANK_LIMIT blank characters no tag is awaited: all of it is answer, the tag
    # that came last included, and nothing is lost
    assert {e.part for e in text} == {ANSWER}
    assert "".join(e.text for e in text) == " " * 6_000_000 + "<think>r</think>a"
    assert len(text[0].text) <= BLANK_LIMIT + 16  # held at most the bound and a chunk


def test_the_think_splitter_alone_is_linear() -> None:
    from tui.engines.dialects.think import ThinkSplitter

    splitter = ThinkSplitter()
    out: list[StreamEvent] = []
    chunk = " " * 16

    def step(i: int) -> None:  # as the decoder hands it over: 6 MB in all
        if splitter.passing:
            out.append(TextChunk(i, chunk))
        else:
            splitter.split(i, chunk, 1, out.append)

    segment_costs(375_000, step)  # main: 14.7 s for the first sixth, the next 3x that
    assert sum(len(e.text) for e in out if isinstance(e, TextChunk)) == 6_000_000
    assert splitter.held == [] and splitter.passing  # past BLANK_LIMIT nothing is held


@pytest.mark.parametrize("blank", [BLANK_LIMIT, BLANK_LIMIT + 1])
def test_blank_text_up_to_the_bound_still_awaits_a_tag(blank: int) -> None:
    """Blank text in one-character chunks, then ``<think>`` in three pieces: up to
    BLANK_LIMIT characters the block is reasoning, stamped when its text came; past it,
    the blank text and the tag are answer, stamped at the first blank."""
    pieces = [" "] * blank + ["<th", "in", "k>", "r", "</think>", "a"]
    events = [sse({"choices": [{"delta": {"content": p}}]}) for p in pieces]
    events.append(sse({"choices": [{"delta": {}, "finish_reason": "stop"}]}))
    text = [(e.part, e.text, e.t_ns) for e in decode(events) if isinstance(e, TextChunk)]
    r_at = (blank + 4) * MS  # the stamp of "r"
    if blank <= BLANK_LIMIT:
        assert text == [(REASONING, "r", r_at), (ANSWER, "a", r_at + 2 * MS)]
    else:
        assert "".join(t for _, t, _ in text) == " " * blank + "<think>r</think>a"
        assert {p for p, _, _ in text} == {ANSWER} and text[0][2] == MS


# --- 5. engine fields kept verbatim -----------------------------------------------------


def test_a_million_key_timings_keeps_its_documented_numbers() -> None:
    """What a record keeps of the answer: the engine's report and the finish reason
    (the proxy's memory for 10 such answers: tests/proxy/test_hostile_answers.py)."""
    dec = decoder_for("openai-chat")
    out: list[StreamEvent] = []
    for i, data in enumerate(fat_fields(1_000_000, 100_000)):  # one 16 MB event
        dec.feed(data, i, out.append)
    dec.close(9, out.append)
    assert dec.extra["timings"] == DOCUMENTED_TIMINGS  # held while it streams: 11 numbers
    out += timings_events(dec, 9)
    report = next(e for e in out if isinstance(e, EngineReport))
    assert report.truth.raw == DOCUMENTED_TIMINGS
    assert tuple(report.truth.raw) == LLAMA_TIMINGS
    end = dec.end(9)
    assert isinstance(end, Finished) and end.reason == "s" * WORD_CHARS
    # the engine's report as a record writes it (--events, a session, a report)
    line = json.dumps(report.truth.to_dict())
    assert len(line) < 1024, len(line)  # main: 16 MB (every key kept)


@pytest.mark.parametrize(
    ("dialect", "body"),
    [
        ("openai-chat", [sse({"choices": [{"delta": {}, "finish_reason": "x" * 10**6}]})]),
        (
            "openai-responses",
            [
                sse(
                    {
                        "type": "response.incomplete",
                        "response": {"incomplete_details": {"reason": ["x"] * 10**5}},
                    }
                )
            ],
        ),
        ("anthropic", [sse({"type": "message_delta", "delta": {"stop_reason": "x" * 10**6}})]),
        ("ollama", [json.dumps({"done": True, "done_reason": "x" * 10**6}).encode() + b"\n"]),
        ("llama", [sse({"content": "", "stop": True, "stop_type": {"x": "y" * 10**6}})]),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_finish_reason_is_a_short_word(dialect: str, body: list[bytes]) -> None:
    end = decode(body, dialect)[-1]
    assert isinstance(end, Finished) and 0 < len(end.reason) <= WORD_CHARS, end


@pytest.mark.parametrize(
    ("dialect", "body"),
    [
        ("openai-chat", sse({"error": {"message": "e" * 10**6}})),
        ("openai-responses", sse({"type": "error", "error": {"message": "e" * 10**6}})),
        ("anthropic", sse({"type": "error", "error": {"message": "e" * 10**6}})),
        ("ollama", json.dumps({"error": {"e": "e" * 10**6}}).encode() + b"\n"),
        ("llama", sse({"error": {"message": "e" * 10**6}})),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_error_text_is_bounded(dialect: str, body: bytes) -> None:
    from tui.engines.dialects.errors import StreamServerError

    with pytest.raises(StreamServerError) as err:
        decode([body], dialect)
    assert len(str(err.value)) <= 320
