"""Ollama's NDJSON line decoder (tui/engines/dialects/ollama.py) and truth_from_final on
hostile values."""

from __future__ import annotations

import pytest

from tui.core.events import ANSWER, REASONING, EngineReport, StreamEvent, TextChunk
from tui.engines.dialects.errors import StreamProtocolError, StreamServerError
from tui.engines.dialects.ollama import OllamaDecoder, truth_from_final


def read(line: str) -> list[StreamEvent]:
    out: list[StreamEvent] = []
    OllamaDecoder("ndjson").payload(line, 1, out.append)
    return out


def test_thinking_with_content_that_is_not_text_keeps_the_thinking() -> None:
    # "thinking" + 5 raised TypeError, which the engine reported as a transport fault
    (ev,) = read('{"message": {"thinking": "hmm", "content": 5}}')
    assert isinstance(ev, TextChunk) and ev.text == "hmm"


def test_thinking_then_content_are_two_parts() -> None:
    a, b = read('{"message": {"thinking": "a", "content": "b"}}')
    assert isinstance(a, TextChunk) and (a.part, a.text) == (REASONING, "a")
    assert isinstance(b, TextChunk) and (b.part, b.text) == (ANSWER, "b")


def test_json_nested_too_deep_is_a_malformed_line() -> None:
    # json.loads raises RecursionError, not ValueError, past the recursion limit
    with pytest.raises(StreamProtocolError, match="malformed NDJSON line"):
        read("[" * 100_000)


def test_errors_name_the_line() -> None:
    with pytest.raises(StreamProtocolError, match=r"not an object: '\[1\]'"):
        read("[1]")
    with pytest.raises(StreamServerError, match="server error: model gone"):
        read('{"error": "model gone"}')


@pytest.mark.parametrize("value", [10**400, float("nan"), float("inf"), -5, "5", True, None])
def test_a_duration_that_is_not_a_duration_is_not_reported(value: object) -> None:
    # 10**400 / 1e6 raised OverflowError; NaN and Infinity made NaN rates
    t = truth_from_final({"done": True, "eval_count": 5, "eval_duration": value})
    assert t.decode_ms is None and t.decode_tps is None


@pytest.mark.parametrize("value", [10**400, 2**63, -1, 1.5])
def test_a_count_that_is_not_a_count_is_not_reported(value: object) -> None:
    # a count of 10**400 made every later rate raise OverflowError
    t = truth_from_final({"done": True, "eval_count": value, "eval_duration": 1_000})
    assert t.decode_tokens is None and t.output_tokens is None


def test_a_tiny_duration_gives_a_rate_not_zero_division() -> None:
    # ms / 1000.0 underflowed to 0.0 for a subnormal ms: ZeroDivisionError
    t = truth_from_final(
        {
            "done": True,
            "prompt_eval_count": 3,
            "prompt_eval_duration": 1e-316,
            "eval_count": 3,
            "eval_duration": 1e-316,
        }
    )
    assert t.decode_ms and t.prompt_ms
    assert t.decode_tps == float("inf") and t.prefill_tps == float("inf")


def test_the_done_line_reports_usage_and_truth() -> None:
    events = read('{"done": true, "eval_count": 2, "eval_duration": 2000000}')
    assert any(isinstance(ev, EngineReport) for ev in events)
