"""SLO attainment (tui/bench/stats/slo.py): who counts as good, who counts at all, and the
Wilson interval."""

from __future__ import annotations

import dataclasses

import pytest

from tests.bench.synthetic import level, record
from tui.bench.stats.aggregate import summarize_level
from tui.bench.stats.slo import SLO_DEFINITION, goodput, wilson


def test_cut_failed_and_uncomputable_requests_are_judged_not_good() -> None:
    recs = [
        record(0, 100, 11, 10, index=0),  # good
        record(1000, 100, 11, 10, index=1),  # good
        dataclasses.replace(record(2000, 100, 11, 10, index=2), status="failed"),
        dataclasses.replace(record(3000, 100, 11, 10, index=3), status="cut"),
        record(4000, 100, 1, 10, index=4),  # one token: no ITL to judge
        dataclasses.replace(record(5000, 100, 11, 10, index=5), status="cancelled"),
    ]
    g = summarize_level(level(recs, 1), None, {"ttft_ms": 150, "itl_ms": 20}, 11)["goodput"]
    assert (g["good"], g["judged"], g["failed"], g["cut"]) == (2, 5, 1, 1)
    assert g["attainment"] == pytest.approx(0.4) == g["fraction"]
    # the one-token answer met its TTFT, so per objective TTFT is 3 of 5
    assert g["per_objective"] == {"ttft_ms": pytest.approx(0.6), "itl_ms": pytest.approx(0.4)}
    assert g["attainment_low"] < 0.4 < g["attainment_high"]


def test_a_cut_request_is_counted_in_the_level_and_its_tokens_are_not() -> None:
    recs = [
        record(0, 100, 11, 10, index=0),
        dataclasses.replace(record(0, 100, 11, 10, index=1), status="cut"),
    ]
    s = summarize_level(level(recs, 1), None, {}, 11)
    assert (s["requests"], s["ok"], s["cut"], s["output_tokens"]) == (2, 1, 1, 11)


def test_wilson_interval_known_values() -> None:
    # 8 of 10: the 95 % Wilson interval is [0.490, 0.943] (textbook value)
    lo, hi = wilson(8, 10)  # type: ignore[misc]
    assert (round(lo, 3), round(hi, 3)) == (0.49, 0.943)
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(0, 10)[0] == pytest.approx(0.0)  # type: ignore[index]
    assert wilson(0, 0) is None


def test_no_requests_gives_no_attainment() -> None:
    g = goodput([], {"ttft_ms": 1.0}, None)
    assert g["attainment"] is None and g["requests_per_s"] is None


def test_the_definition_names_every_rule() -> None:
    for words in (
        "exactly at its limit",
        "fewer than 2 output tokens",
        "cut",
        "Wilson",
        "wall time",
    ):
        assert words in SLO_DEFINITION


def test_usage_cached_tokens_are_read_only_when_well_formed() -> None:
    from tui.engines.dialects.openai_chat import OpenAIChatDecoder

    def cached(usage: object) -> int | None:
        dec = OpenAIChatDecoder("sse")
        dec.take_usage({"completion_tokens": 1, "prompt_tokens_details": usage}, 1)
        return dec.cached_tokens

    assert cached({"cached_tokens": 192}) == 192
    assert cached(None) is None
    assert cached({"cached_tokens": True}) is None
    assert cached({"cached_tokens": -1}) is None
    assert cached({"cached_tokens": "5"}) is None
