"""Statistics with known answers: fixed samples, known medians, intervals and η."""

from __future__ import annotations

import dataclasses
import math

import pytest

from tests.bench.synthetic import level, record
from tui.bench.stats.aggregate import meets_slo, summarize_level
from tui.bench.stats.samples import interval_dict
from tui.core.stats import ratio_ci, summarize


def test_constant_sample_has_a_degenerate_interval():
    iv = interval_dict([5.0] * 10)
    assert iv == {"estimate": 5.0, "low": 5.0, "high": 5.0, "n": 10}


def test_two_values_interval_spans_both():
    # resampled medians of {1, 3} are 1, 2, 3 with probabilities 1/4, 1/2, 1/4
    iv = interval_dict([1.0, 3.0])
    assert (iv["estimate"], iv["low"], iv["high"]) == (2.0, 1.0, 3.0)


def test_three_values_interval():
    # P(resampled median = 1) = 7/27 > 2.5 %, so the interval is [min, max]
    iv = interval_dict([1.0, 2.0, 3.0])
    assert (iv["estimate"], iv["low"], iv["high"]) == (2.0, 1.0, 3.0)


def test_single_value_has_no_interval():
    assert interval_dict([7.0]) == {"estimate": 7.0, "low": None, "high": None, "n": 1}
    assert interval_dict([]) is None


def test_percentiles_of_1_to_101():
    s = summarize(list(range(1, 102)))
    assert (s.p50, s.p90, s.p95, s.p99) == (51, 91, 96, 100)


def test_ratio_of_constant_samples_is_exact():
    iv = ratio_ci([3.0] * 5, [1.5] * 4)
    assert (iv.estimate, iv.low, iv.high) == (2.0, 2.0, 2.0)


def test_ratio_interval_contains_the_estimate():
    a = [10.0, 11.0, 12.0, 13.0, 14.0]
    b = [5.0, 5.5, 6.0, 6.5, 7.0]
    iv = ratio_ci(a, b)
    assert iv.estimate == 2.0
    assert iv.low <= 2.0 <= iv.high
    assert iv.low >= min(a) / max(b) and iv.high <= max(a) / min(b)


def _c1_level():
    # 3 sequential requests, 1 s apart: TTFT 100 ms, 11 tokens 10 ms apart (e2e 200 ms)
    return level([record(i * 1000, 100, 11, 10, index=i) for i in range(3)], 1)


def test_level_metrics_known_answers():
    s = summarize_level(_c1_level(), None, {}, max_tokens=11)
    assert s["ok"] == 3 and s["failed"] == 0
    assert s["wall_s"] == pytest.approx(2.2)
    assert s["output_tokens"] == 33
    assert s["total_tps"] == pytest.approx(15.0)
    assert s["medians"]["ttft_ms"]["estimate"] == pytest.approx(100.0)
    assert s["medians"]["decode_tps"]["estimate"] == pytest.approx(100.0)  # 10 gaps in 100 ms
    assert s["medians"]["tpot_ms"]["estimate"] == pytest.approx(10.0)
    assert s["percentiles"]["e2e_ms"]["p99"] == pytest.approx(200.0)
    assert s["short_outputs"] == 0


def test_eta_is_total_over_single_request_rate():
    single = summarize_level(_c1_level(), None, {}, 11)["total_tps"]
    # two requests at once, same shape: 22 tokens in 0.2 s = 110 tok/s
    both = level([record(0, 100, 11, 10, "c=2", 2, 0), record(0, 100, 11, 10, "c=2", 2, 1)], 2)
    s = summarize_level(both, single, {}, 11)
    assert s["total_tps"] == pytest.approx(110.0)
    assert s["eta"] == pytest.approx(110.0 / 15.0)
    assert s["eta_per_slot"] == pytest.approx(110.0 / 15.0 / 2)


def test_goodput_against_slos():
    lv = level([record(0, 100, 11, 10, index=0), record(1000, 300, 11, 10, index=1)], 1)
    s = summarize_level(lv, None, {"ttft_ms": 150}, 11)
    g = s["goodput"]
    assert g["good"] == 1 and g["fraction"] == 0.5
    assert g["requests_per_s"] == pytest.approx(1 / 1.4)
    assert g["tokens_per_s"] == pytest.approx(11 / 1.4)
    s = summarize_level(lv, None, {"tpot_ms": 9.0}, 11)  # TPOT is 10 ms: none pass
    assert s["goodput"]["good"] == 0


@pytest.mark.parametrize(
    "key, limit", [("ttft_ms", 100.0), ("tpot_ms", 10.0), ("e2e_ms", 200.0), ("itl_ms", 10.0)]
)
def test_a_request_exactly_at_an_slo_limit_meets_it(key: str, limit: float) -> None:
    """An SLO is a limit not to exceed: a request exactly on it is good; just over is not."""
    lv = level([record(0, 100, 11, 10)], 1)  # TTFT 100 ms, TPOT 10 ms, e2e 200 ms, ITL 10 ms
    m = lv.records[0].metrics
    assert (m.ttft_ms, m.tpot_ms, m.e2e_ms, m.itl_ms_p90) == (100.0, 10.0, 200.0, 10.0)
    assert meets_slo(lv.records[0], {key: limit})
    assert summarize_level(lv, None, {key: limit}, 11)["goodput"]["good"] == 1
    below = math.nextafter(limit, 0.0)  # the value is one float step over this limit
    assert not meets_slo(lv.records[0], {key: below})
    assert summarize_level(lv, None, {key: below}, 11)["goodput"]["good"] == 0


def test_a_request_without_the_metric_does_not_meet_its_slo() -> None:
    """A one-token answer has no TPOT and no ITL: it cannot be shown to meet a limit on
    them, so it does not (its TTFT still meets a TTFT limit)."""
    one = record(0, 100, 1, 10)
    assert one.ok and one.metrics.tpot_ms is None and one.metrics.itl_ms_p90 is None
    assert meets_slo(one, {"ttft_ms": 150})
    assert not meets_slo(one, {"tpot_ms": 1000}) and not meets_slo(one, {"itl_ms": 1000})


def test_goodput_fraction_counts_failed_requests_in_the_whole() -> None:
    """Goodput's fraction is of the requests sent: a failed one is not good, and it stays
    in the denominator."""
    good = record(0, 100, 11, 10, index=0)
    failed = dataclasses.replace(record(1000, 100, 11, 10, index=1), status="failed")
    s = summarize_level(level([good, failed], 1), None, {"ttft_ms": 150}, 11)
    assert (s["ok"], s["failed"]) == (1, 1)
    assert s["goodput"]["good"] == 1 and s["goodput"]["fraction"] == 0.5


def test_short_outputs_are_counted():
    lv = level([record(0, 100, 5, 10)], 1)
    assert summarize_level(lv, None, {}, max_tokens=11)["short_outputs"] == 1
