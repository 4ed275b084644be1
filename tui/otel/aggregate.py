"""Cumulative explicit-bucket histograms, kept by infertop itself, exported as OTLP.

The SDK's instruments cost several microseconds per recorded value (attributes turned
into a key, a lock, views, per call); a request gives the time-per-output-chunk metric
one value per chunk, and on the proxy that came to ~10 µs per forwarded token
(benchmarks/otel_overhead.py). Here a value costs a bisect and two additions, on the
exporter's own thread; every ``interval_s`` the table becomes the SDK's ``MetricsData``
(cumulative temporality, from the exporter's start) and goes to the OTLP/HTTP metric
exporter — the same bytes on the wire as the SDK's own reader would send.

A bucket counts the values in (previous bound, its bound]: ``le`` in Prometheus' terms,
as the conventions' ExplicitBucketBoundaries mean. Memory is bounded by the attribute
sets (tui/otel/measures.py bounds the model names a client can make).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from typing import Any

from tui.otel.conventions import MetricSpec
from tui.otel.measures import Attributes

Key = tuple[str, tuple[tuple[str, str | int], ...]]


class _Series:
    __slots__ = ("counts", "sum", "count", "min", "max", "attributes")

    def __init__(self, buckets: int, attributes: Attributes) -> None:
        self.counts = [0] * (buckets + 1)
        self.sum = 0.0
        self.count = 0
        self.min = float("inf")
        self.max = float("-inf")
        self.attributes = attributes


class HistogramTable:
    """Every histogram point recorded so far, per (metric, attributes). Used from one
    thread (the exporter's)."""

    def __init__(self, specs: tuple[MetricSpec, ...]) -> None:
        self.specs = {s.name: s for s in specs}
        self.start_ns = time.time_ns()
        self._series: dict[Key, _Series] = {}

    def record(self, spec: MetricSpec, values: list[float], attributes: Attributes) -> None:
        """``values`` of one metric with one set of attributes (a request's chunk gaps:
        the key is made once)."""
        if not values:
            return
        key = (spec.name, tuple(sorted(attributes.items())))
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(len(spec.buckets), dict(attributes))
        counts, bounds = series.counts, spec.buckets
        for value in values:
            counts[bisect_left(bounds, value)] += 1
        series.sum += sum(values)
        series.count += len(values)
        series.min = min(series.min, min(values))
        series.max = max(series.max, max(values))

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
