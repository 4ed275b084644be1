"""Metric definitions against hand-computed answers, traps included."""

import pytest

from tui.core.events import (
    EngineReport,
    EngineTruth,
    Failed,
    Finished,
    FirstByte,
    RequestSent,
    TextChunk,
    Usage,
)
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline

MS = 1_000_000


def timeline(*events):
    tl = RequestTimeline()
    for e in events:
        tl.add(e)
    return tl


def test_role_only_first_chunk_is_not_the_first_token():
    # sent at 0; role-only chunk at 50 ms; tokens at 200, 210, 230 ms; end at 231 ms
    tl = timeline(
        RequestSent(0),
        TextChunk(50 * MS, "", None),
        TextChunk(200 * MS, "Hel", 1),
        TextChunk(210 * MS, "lo", 1),
        TextChunk(230 * MS, "!", 1),
        Usage(231 * MS, 7, 3),
        Finished(231 * MS),
    )
    m = compute_metrics(tl)
    assert m.ttfr_ms == 50.0
    assert m.ttft_ms == 200.0
    assert m.itl_chunk_ms == [10.0, 20.0]
    assert m.itl_token_ms == [10.0, 20.0]
    assert m.e2e_ms == 231.0
    assert m.tpot_ms == pytest.approx((231 - 200) / 2)
    assert m.decode_tps == pytest.approx(2 / 0.030)
    assert m.output_tokens == 3 and m.output_tokens_source == "usage"
    assert m.prefill_tps == pytest.approx(7 / 0.2)
    assert m.prefill_tps_source == "estimate"
    assert tl.text == "Hello!"


def test_first_byte_event_gives_ttfr_before_any_chunk():
    tl = timeline(RequestSent(0), FirstByte(5 * MS), TextChunk(9 * MS, "a", 1), Finished(9 * MS))
    m = compute_metrics(tl)
    assert m.ttfr_ms == 5.0 and m.ttft_ms == 9.0


def test_chunks_carrying_several_tokens_spread_their_gap():
    # gaps: 30 ms carrying 3 tokens, 10 ms carrying 1 token
    tl = timeline(
        RequestSent(0),
        TextChunk(100 * MS, "a", 1),
        TextChunk(130 * MS, "bcd", 3),
        TextChunk(140 * MS, "e", 1),
        Finished(140 * MS),
    )
    m = compute_metrics(tl)
    assert m.itl_chunk_ms == [30.0, 10.0]
    # one value per gap, weighted by its tokens: the 30 ms gap is 3 tokens of 10 ms
    assert m.itl_token_ms == [10.0, 10.0] and m.itl_token_weights == [3, 1]
    assert m.itl_token_recent(200) == [10.0, 10.0, 10.0, 10.0]
    assert not m.itl_token_estimated
    assert m.output_tokens == 5 and m.output_tokens_source == "engine-chunks"
    assert m.decode_tps == pytest.approx(4 / 0.040)
    assert m.tpot_ms == pytest.approx(40 / 4)


def test_one_token_answer_has_ttft_but_no_decode_rate():
    tl = timeline(
        RequestSent(0), TextChunk(80 * MS, "Hi", 1), Usage(81 * MS, 5, 1), Finished(81 * MS)
    )
    m = compute_metrics(tl)
    assert m.ttft_ms == 80.0
    assert m.output_tokens == 1
    assert m.itl_token_ms == [] and m.itl_ms_p50 is None
    assert m.tpot_ms is None and m.decode_tps is None


def test_zero_token_answer():
    tl = timeline(
        RequestSent(0), TextChunk(40 * MS, "", None), Usage(41 * MS, 5, 0), Finished(41 * MS)
    )
    m = compute_metrics(tl)
    assert m.ttft_ms is None
    assert m.ttfr_ms == 40.0
    assert m.output_tokens == 0
    assert m.decode_tps is None and m.tpot_ms is None
    assert m.e2e_ms == 41.0


def test_engine_count_disagreeing_with_chunk_count_wins_and_itl_is_estimated():
    # 3 content chunks but the engine says 5 tokens: the 4 tokens after the first are
    # spread over 2 gaps (2 tokens per gap).
    tl = timeline(
        RequestSent(0),
        TextChunk(100 * MS, "a"),
        TextChunk(120 * MS, "bc"),
        TextChunk(160 * MS, "de"),
        Usage(161 * MS, 3, 5),
        Finished(161 * MS),
    )
    m = compute_metrics(tl)
    assert m.output_tokens == 5 and m.output_tokens_source == "usage"
    assert m.itl_chunk_ms == [20.0, 40.0]
    assert m.itl_token_ms == [10.0, 20.0] and m.itl_token_weights == [1, 1]
    assert m.itl_token_estimated
    assert m.decode_tps == pytest.approx(4 / 0.060)
    assert m.tpot_ms == pytest.approx(61 / 4)


def test_no_engine_counts_means_chunk_count_estimate():
    tl = timeline(
        RequestSent(0), TextChunk(10 * MS, "a"), TextChunk(20 * MS, "b"), Finished(20 * MS)
    )
    m = compute_metrics(tl)
    assert m.output_tokens == 2
    assert m.output_tokens_source == "chunk-count-estimate"
    assert m.output_tokens_estimated


def test_engine_prefill_and_comparison():
    truth = EngineTruth(
        prompt_tokens=100,
        prompt_eval_tokens=100,
        prompt_ms=50.0,
        decode_tokens=9,
        decode_ms=90.0,
        output_tokens=10,
    )
    tl = timeline(
        RequestSent(0),
        TextChunk(60 * MS, "x", 1),
        *[TextChunk((60 + 12 * i) * MS, "y", 1) for i in range(1, 10)],
        Usage(170 * MS, 100, 10),
        EngineReport(170 * MS, truth),
        Finished(170 * MS),
    )
    m = compute_metrics(tl)
    assert m.prefill_tps == pytest.approx(2000.0) and m.prefill_tps_source == "engine"
    assert m.ttft_minus_engine_prefill_ms == pytest.approx(10.0)
    assert m.decode_tps == pytest.approx(9 / 0.108)
    assert m.engine_decode_tps == pytest.approx(100.0)
    assert m.decode_tps_vs_engine == pytest.approx((9 / 0.108) / 100.0)


def test_failed_stream_keeps_partial_text_and_metrics():
    tl = timeline(
        RequestSent(0),
        TextChunk(30 * MS, "par", 1),
        TextChunk(40 * MS, "tial", 1),
        Failed(45 * MS, "connection closed", "protocol"),
    )
    m = compute_metrics(tl)
    assert tl.text == "partial"
    assert m.error == "connection closed" and m.finish_reason == "error"
    assert m.ttft_ms == 30.0 and m.e2e_ms == 45.0
    assert m.itl_token_ms == [10.0]


def test_timeline_round_trips_through_dict():
    tl = timeline(
        RequestSent(1000),
        TextChunk(1000 + 5 * MS, "a", 1),
        TextChunk(1000 + 9 * MS, "b", 1),
        Usage(1000 + 9 * MS, 2, 2),
        Finished(1000 + 9 * MS),
    )
    again = RequestTimeline.from_dict(tl.to_dict())
    assert compute_metrics(again).to_dict() == compute_metrics(tl).to_dict()


def test_a_chunk_with_zero_tokens_adds_text_but_no_gap():
    """llama.cpp's final UTF-8 flush can carry text after its token was counted: tokens
    [1, 1, 0]. Its text is kept; its stamp is not a token's (no gap, no decode time)."""
    tl = timeline(
        RequestSent(0),
        TextChunk(100 * MS, "a", 1),
        TextChunk(110 * MS, "b", 1),
        TextChunk(150 * MS, "\ufffd", 0),
        Finished(151 * MS),
    )
    m = compute_metrics(tl)
    assert tl.text == "ab\ufffd"
    assert m.output_tokens == 2 and m.output_tokens_source == "engine-chunks"
    assert m.itl_chunk_ms == [10.0] and m.itl_token_ms == [10.0]
    assert m.decode_ms == 10.0 and m.decode_tps == pytest.approx(1 / 0.010)
    assert m.content_chunks == 3  # the text chunks, the zero-token one included


def test_zero_token_text_first_still_is_the_first_text_seen():
    tl = timeline(
        RequestSent(0),
        TextChunk(90 * MS, " ", 0),
        TextChunk(100 * MS, "a", 1),
        TextChunk(120 * MS, "b", 1),
        Finished(120 * MS),
    )
    m = compute_metrics(tl)
    assert m.ttft_ms == 90.0  # the first text the user saw
    assert m.itl_token_ms == [20.0] and m.decode_tps == pytest.approx(1 / 0.020)


def test_every_engine_truth_number_is_named_for_the_session_record():
    """TRUTH_NUMBERS is what a session record's engine_truth is checked for and replayed
    from: a number EngineTruth gains must be named there, or a replay drops it."""
    from dataclasses import fields

    from tui.core.events import TRUTH_NUMBERS

    names = {f.name for f in fields(EngineTruth)} - {"source", "raw"}
    assert set(TRUTH_NUMBERS) == names
    truth = EngineTruth(**{name: i + 1 for i, name in enumerate(TRUTH_NUMBERS)}, source="s")
    d = truth.to_dict()
    assert list(d)[: len(TRUTH_NUMBERS) + 1] == ["source", *TRUTH_NUMBERS]
    assert [d[name] for name in TRUTH_NUMBERS] == list(range(1, len(TRUTH_NUMBERS) + 1))
