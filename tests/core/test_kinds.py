"""The core's kinds that cross modules are Literal types (mypy --strict checks every
use); what comes back from a file or another process is read into them here, never
trusted as it is."""

from __future__ import annotations

import pytest

from tui.core.events import (
    FAILURE_KINDS,
    PARTS,
    WORD_CHARS,
    Finished,
    end_reason_of,
    engine_word,
    failure_kind_of,
    part_of,
)
from tui.core.metrics import COUNT_SOURCES, PREFILL_SOURCES, RequestMetrics
from tui.core.timeline import RequestTimeline
from tui.proxy.rows import metrics_from_json


def test_the_kinds() -> None:
    assert PARTS == ("answer", "reasoning", "tool")
    assert set(FAILURE_KINDS) == {
        "connect", "http", "protocol", "timeout", "load", "engine", "cancelled", "internal"
    }  # fmt: skip
    assert COUNT_SOURCES == ("usage", "engine-chunks", "chunk-count-estimate")
    assert PREFILL_SOURCES == ("engine", "estimate")


def test_values_read_back_are_kinds_or_nothing() -> None:
    assert part_of("reasoning") == "reasoning" and part_of(["tool"]) == "answer"
    assert failure_kind_of("timeout") == "timeout" and failure_kind_of("oops") is None
    assert end_reason_of("error") == "error" and end_reason_of(None) is None
    assert end_reason_of("x" * 10_000) == "x" * WORD_CHARS
    assert engine_word({"a": 1}) == "dict" and engine_word(3) == "3" and engine_word("") is None
    assert Finished(0, engine_word("eos") or "stop").reason == "eos"


def test_a_timeline_from_a_file_keeps_only_known_kinds() -> None:
    chunks = [[1, "a", 1, "reasoning"], [2, "b", 1, ["x"]]]
    tl = RequestTimeline.from_dict(
        {"chunks": chunks, "finish_reason": "s" * 99, "error_kind": "gremlins"}
    )
    assert tl.chunk_part == ["reasoning", "answer"]
    assert tl.finish_reason == "s" * WORD_CHARS and tl.error_kind is None


def test_a_proxys_metrics_json_is_read_into_the_kinds() -> None:
    m = RequestMetrics(ttft_ms=1.0, ttfr_ms=1.0, e2e_ms=2.0, output_tokens_source="usage")
    m.prefill_tps_source, m.finish_reason = "estimate", "stop"
    back = metrics_from_json(m.to_dict(with_lists=False))
    assert (back.output_tokens_source, back.prefill_tps_source) == ("usage", "estimate")
    assert back.finish_reason == "stop"
    for field in ("output_tokens_source", "reasoning_tokens_source", "prefill_tps_source"):
        with pytest.raises(ValueError, match=field):
            metrics_from_json({**m.to_dict(with_lists=False), field: "made-up"})
