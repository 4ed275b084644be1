"""Cumulative explicit-bucket histograms, kept by infertop itself, exported as OTLP.

The SDK's instruments cost several microseconds per recorded value (attributes turned
into a key, a lock, views, per call); a request gives the time-per-output-chunk metric
one value per chunk, and on the proxy that came to ~10 µs per forwarded token
(benchmarks/otel_overhead.py). Here one value costs a bisect and a few additions, and a
request's many chunk gaps one sort and a bisect per bucket bound (the values as the
request holds them, in ms, divided only where a bound is settled), on the exporter's own
thread; every ``interval_s`` the table becomes the SDK's ``MetricsData``
(cumulative temporality, from the exporter's start) and goes to the OTLP/HTTP metric
exporter — the same bytes on the wire as the SDK's own reader would send.

A bucket counts the values in (previous bound, its bound]: ``le`` in Prometheus' terms,
as the conventions' ExplicitBucketBoundaries mean. Memory is bounded by the attribute
sets (tui/otel/measures.py bounds the model names a client can make).
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

from tui.otel.conventions import MetricSpec
from tui.otel.measures import AttributeKey, Attributes, sorted_key

Key = tuple[str, AttributeKey]


class _Series:
    __slots__ = ("counts", "sum", "count", "min", "max", "attributes")

    def __init__(self, buckets: int, attributes: Attributes) -> None:
        self.counts = [0] * (buckets + 1)
        self.sum = 0.0
        self.count = 0
        self.min = float("inf")
        self.max = float("-inf")
        self.attributes = attributes


def _count_at_most(xs: list[float], bound: float, per: float) -> int:
    """How many of sorted ``xs`` have ``x / per <= bound``: found near ``bound * per`` by
    a binary search, then settled by the division itself (so a value on a bound lands in
    the bucket its own quotient does, as one bisect of ``x / per`` would put it)."""
    i = bisect_right(xs, bound * per)
    while i < len(xs) and xs[i] / per <= bound:
        i += 1
    while i > 0 and xs[i - 1] / per > bound:
        i -= 1
    return i


class HistogramTable:
    """Every histogram point recorded so far, per (metric, attributes). Used from one
    thread (the exporter's)."""

    def __init__(self, specs: tuple[MetricSpec, ...]) -> None:
        self.specs = {s.name: s for s in specs}
        self.start_ns = time.time_ns()
        self._series: dict[Key, _Series] = {}

    def record(
        self,
        spec: MetricSpec,
        values: Sequence[float],
        attributes: Attributes,
        per: float = 1.0,
        key: AttributeKey | None = None,
    ) -> None:
        """``values[i] / per`` of one metric with one set of attributes (a request's chunk
        gaps, in ms with ``per`` = 1000: many values are sorted once and counted by bound,
        not each divided and searched). ``key``: the attributes' :func:`sorted_key`, where
        the caller keeps it (tui/otel/measures.py does), else made here."""
        if not values:
            return
        series = self._series.get((spec.name, key or sorted_key(attributes)))
        if series is None:
            series = self._series[(spec.name, key or sorted_key(attributes))] = _Series(
                len(spec.buckets), dict(attributes)
            )
        counts, bounds = series.counts, spec.buckets
        if len(values) == 1:
            value = values[0] / per
            counts[bisect_left(bounds, value)] += 1
            series.sum += value
            series.count += 1
            if value < series.min:
                series.min = value
            if value > series.max:
                series.max = value
            return
        xs = sorted(values)
        n, low, high = len(xs), xs[0] / per, xs[-1] / per  # x ↦ x / per keeps the order
        # the bounds below the least value count none of them; from the first bound that
        # holds them all, the rest count none either: only the bounds between are searched
        below = 0  # values in the buckets so far
        for i in range(bisect_left(bounds, low), len(bounds)):
            upto = _count_at_most(xs, bounds[i], per)
            counts[i] += upto - below
            below = upto
            if below == n:
                break
        counts[-1] += n - below
        series.sum += sum(xs) / per
        series.count += n
        if low < series.min:
            series.min = low
        if high > series.max:
            series.max = high

    def __len__(self) -> int:
        return len(self._series)

    def metrics_data(self, resource: Any, scope: Any, schema_url: str) -> Any:
        """The table now, as the SDK's ``MetricsData`` (what its OTLP exporter sends)."""
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            Histogram,
            HistogramDataPoint,
            Metric,
            MetricsData,
            ResourceMetrics,
            ScopeMetrics,
        )

        now = time.time_ns()
        points: dict[str, list[Any]] = {}
        for (name, _), s in self._series.items():
            spec = self.specs[name]
            points.setdefault(name, []).append(
                HistogramDataPoint(
                    attributes=s.attributes,
                    start_time_unix_nano=self.start_ns,
                    time_unix_nano=now,
                    count=s.count,
                    sum=s.sum,
                    bucket_counts=list(s.counts),
                    explicit_bounds=list(spec.buckets),
                    min=s.min,
                    max=s.max,
                )
            )
        metrics = [
            Metric(
                name=name,
                description=self.specs[name].description,
                unit=self.specs[name].unit,
                data=Histogram(data, AggregationTemporality.CUMULATIVE),
            )
            for name, data in points.items()
        ]
        scoped = ScopeMetrics(scope=scope, metrics=metrics, schema_url=schema_url)
        return MetricsData(
            [ResourceMetrics(resource=resource, scope_metrics=[scoped], schema_url=schema_url)]
        )
