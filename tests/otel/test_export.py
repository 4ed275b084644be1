"""The OTLP exporter (tui/otel/export.py) against a receiver that decodes what it gets
with opentelemetry-proto: spans with the request's ids, stamps and attributes, metrics
with the advised boundaries; and against collectors that are dead, failing or hanging:
publish stays O(1), memory bounded, drops counted, close bounded in time."""

from __future__ import annotations

import socket
import time

import pytest

from tests.support.made_outcomes import outcome
from tests.support.otlp_sink import OtlpSink
from tui.core.trace_context import continue_or_start
from tui.otel import conventions as C

pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs it")
from tui.otel.export import OtelExporter, OtelUnavailable, signal_endpoints  # noqa: E402


@pytest.fixture
def sink():
    s = OtlpSink()
    yield s
    s.stop()


def test_spans_and_metrics_reach_the_collector(sink) -> None:
    ex = OtelExporter(sink.url, flush_s=0.2, metric_interval_s=60)
    try:
        sent = []
        for n in range(5):
            ctx = continue_or_start(None)
            o = outcome(n, trace_id=ctx.trace_id, span_id=ctx.span_id)
            sent.append(o)
            ex.publish(o)
        assert ex.flush(10)
    finally:
        ex.close()
    assert ex.stats.spans_exported == 5 and ex.stats.spans_dropped == 0
    by_id = {s["span_id"]: s for s in sink.spans}
    for o in sent:
        s = by_id[o.span_id]
        assert s["trace_id"] == o.trace_id and s["name"] == "chat smollm2"
        assert s["kind"] == 3  # SPAN_KIND_CLIENT
        assert s["start_ns"] == round(o.t0_wall * 1e9) and s["end_ns"] - s["start_ns"] == 10**9
        assert s["attributes"][C.GEN_AI_USAGE_OUTPUT_TOKENS] == 30
        assert s["scope"] == "infertop" and s["schema_url"] == C.SCHEMA_URL
    assert sink.resource["service.name"] == "infertop"
    (duration,) = sink.histogram_list("gen_ai.client.operation.duration")
    assert duration.unit == "s" and tuple(duration.bounds) == C.DURATION_BUCKETS
    assert duration.count == 5 and duration.attributes[C.GEN_AI_REQUEST_MODEL] == "smollm2"
    usage = sink.histogram_list("gen_ai.client.token.usage")
    assert {h.attributes[C.GEN_AI_TOKEN_TYPE] for h in usage} == {"input", "output"}
    assert all(tuple(h.bounds) == C.TOKEN_BUCKETS and h.count == 5 for h in usage)
    (ttfc,) = sink.histogram_list("gen_ai.client.operation.time_to_first_chunk")
    assert ttfc.count == 5 and ttfc.sum == pytest.approx(1.25)
    (tpot,) = sink.histogram_list("gen_ai.server.time_per_output_token")
    assert tuple(tpot.bounds) == C.SERVER_TPOT_BUCKETS


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_collector_drops_and_counts_never_holds(tmp_path) -> None:
    notes: list[str] = []
    ex = OtelExporter(
        f"http://127.0.0.1:{_closed_port()}",
        flush_s=0.1,
        timeout_s=0.5,
        queue_limit=100,
        metric_interval_s=60,
        note=notes.append,
    )
    try:
        t0 = time.perf_counter()
        for n in range(1000):
            ex.publish(outcome(n))
        per_publish = (time.perf_counter() - t0) / 1000
        deadline = time.monotonic() + 20
        while ex.stats.spans_dropped < 1000 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        t_close = time.perf_counter()
        ex.close(timeout_s=3)
        closed_in = time.perf_counter() - t_close
    # never more than the queue held: everything else dropped at publish, counted
    assert ex.stats.spans_exported == 0 and ex.stats.spans_dropped == 1000
    assert ex.stats.batches_failed >= 1
    # said once for the spans, and at most once for the metrics
    assert len([n for n in notes if "batches are dropped" in n]) == 1 and len(notes) <= 2
    assert per_publish < 0.001  # an append, not a network call (margin: ~100x)
    assert closed_in < 6


@pytest.mark.parametrize("mode", ["500", "hang"])
def test_a_failing_or_hanging_collector(mode) -> None:
    sink = OtlpSink(status=500) if mode == "500" else OtlpSink(hang=3.0)
    try:
        ex = OtelExporter(sink.url, flush_s=0.1, timeout_s=0.5, metric_interval_s=60)
        t0 = time.perf_counter()
        for n in range(50):
            ex.publish(outcome(n))
        assert time.perf_counter() - t0 < 0.5
        deadline = time.monotonic() + 15
        while ex.stats.spans_dropped < 50 and time.monotonic() < deadline:
            time.sleep(0.1)
        ex.close(timeout_s=2)
        assert ex.stats.spans_dropped == 50 and ex.stats.spans_exported == 0
        assert sink.requests >= 1
    finally:
        sink.stop()


def test_endpoints_and_bad_values(monkeypatch) -> None:
    assert signal_endpoints("http://h:4318") == (
        "http://h:4318/v1/traces",
        "http://h:4318/v1/metrics",
    )
    assert signal_endpoints("http://h:4318/v1/traces")[1] == "http://h:4318/v1/metrics"
    assert signal_endpoints("env") == (None, None)
    for bad in ("ftp://h", "h:4318", ""):
        with pytest.raises(OtelUnavailable, match="--otlp"):
            signal_endpoints(bad)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(OtelUnavailable, match="http/protobuf"):
        OtelExporter("http://127.0.0.1:1")


def test_the_env_endpoint_is_the_sdks(sink, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "my-gateway")
    ex = OtelExporter("env", flush_s=0.1, metric_interval_s=60)
    ex.publish(outcome())
    assert ex.flush(10)
    ex.close()
    assert len(sink.spans) == 1 and sink.resource["service.name"] == "my-gateway"


def test_captured_content_only_for_the_users_own_chat(sink) -> None:
    ex = OtelExporter(sink.url, capture_content=True, flush_s=0.1, metrics=False)
    for o in (outcome(1, source="chat"), outcome(2, source="proxy")):
        ex.attach_content(o.id, '[{"role":"user"}]', '[{"role":"assistant"}]')
        ex.publish(o)
    assert ex.flush(10)
    ex.close()
    got = {s["attributes"][C.INFERTOP_REQUEST_ID]: s["attributes"] for s in sink.spans}
    assert got["r1"][C.GEN_AI_INPUT_MESSAGES] == '[{"role":"user"}]'
    assert C.GEN_AI_INPUT_MESSAGES not in got["r2"]


def test_the_rhythm_is_the_sdks_batch_processors() -> None:
    from tui.otel.rhythm import batch_settings

    assert batch_settings({}) == batch_settings({"OTEL_BSP_SCHEDULE_DELAY": "x"})
    d = batch_settings({})
    assert (d.flush_s, d.batch, d.queue) == (5.0, 512, 4096)
    s = batch_settings(
        {"OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": " 64 ",
         "OTEL_BSP_MAX_QUEUE_SIZE": "0"}
    )  # fmt: skip
    assert (s.flush_s, s.batch, s.queue) == (0.25, 64, 4096)  # 0: not positive, the default


def test_failed_metrics_rest_too() -> None:
    """A collector that refuses every export is asked again after 1 s, 2 s, 4 s, ... —
    for the metrics as for the spans — not at every interval."""
    sink = OtlpSink(status=500)
    try:
        ex = OtelExporter(sink.url, flush_s=0.05, timeout_s=0.5, metric_interval_s=0.05)
        ex.publish(outcome(1))
        time.sleep(2.5)
        asked = sink.requests
        ex.close(timeout_s=2)
    finally:
        sink.stop()
    # a span batch, then the metrics at ~0, ~1 and ~3 s; every 0.05 s would be ~50
    assert ex.stats.metric_failures >= 1 and 2 <= asked <= 5
