"""infertop's own histograms (tui/otel/aggregate.py): many values of a request (its chunk
gaps, in ms) counted by sorting once and searching per bound land in exactly the buckets
one bisect of each value in seconds gives — a value on a bound included."""

from __future__ import annotations

from bisect import bisect_left

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.otel import conventions as C
from tui.otel.aggregate import HistogramTable

SPEC = C.CLIENT_TIME_PER_OUTPUT_CHUNK
ON_BOUNDS = [b * 1000.0 for b in SPEC.buckets]  # in ms: each exactly on a bound in seconds


def _reference(ms: list[float]) -> tuple[list[int], float, float, float]:
    counts = [0] * (len(SPEC.buckets) + 1)
    seconds = [v / 1000.0 for v in ms]
    for v in seconds:
        counts[bisect_left(SPEC.buckets, v)] += 1
    return counts, sum(seconds), min(seconds), max(seconds)


@settings(max_examples=300, deadline=None)
@given(
    ms=st.lists(
        st.one_of(
            st.sampled_from(ON_BOUNDS),
            st.floats(min_value=0.0, max_value=200_000.0),
            st.sampled_from([0.0, 1e-9, 9.999999999999998, 10.000000000000002, 5e5]),
        ),
        min_size=1,
        max_size=300,
    )
)
def test_sorted_counting_is_one_bisect_per_value(ms) -> None:
    table = HistogramTable(C.METRICS)
    table.record(SPEC, ms, {"a": "b"}, per=1000.0)
    table.record(SPEC, ms[:1], {"a": "b"}, per=1000.0)  # one value: the direct way
    (series,) = table._series.values()
    counts, total, low, high = _reference(ms + ms[:1])
    assert series.counts == counts and series.count == len(ms) + 1
    assert (series.min, series.max) == (low, high)
    assert series.sum == pytest.approx(total, rel=1e-12, abs=1e-12)


def test_a_value_whose_quotient_and_product_disagree_lands_by_its_quotient() -> None:
    # bounds b where some v has v / 1000 <= b but not v <= b * 1000, or the reverse
    # (none of the conventions' bounds is one; the table must not depend on that)
    bounds = (10.949753240808642, 16.023599035377835)
    spec = C.MetricSpec("x", "s", "a made-up metric", bounds)
    ms = [10949.753240808643, 16023.599035377836, 10949.75324080864, 16023.59903537784]
    table = HistogramTable((spec,))
    table.record(spec, ms, {}, per=1000.0)
    (series,) = table._series.values()
    want = [0] * 3
    for v in ms:
        want[bisect_left(bounds, v / 1000.0)] += 1
    assert series.counts == want
