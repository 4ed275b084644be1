"""infertop's own OTLP span encoding (tui/otel/otlp_wire.py) against the SDK's: the same
spans encoded by the SDK's ``encode_spans`` (from the ``ReadableSpan`` the SDK's way
makes, tui/otel/send.py) give the same bytes, and the same message decoded with
opentelemetry-proto; the exporter takes the encoded way with the pinned SDK, and both
ways reach a receiver as the same spans; hostile strings and values OTLP cannot hold
cost an attribute at most, never a batch."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.made_outcomes import metrics, outcome
from tests.support.otlp_sink import OtlpSink
from tui.core.events import EngineTruth
from tui.core.outcome import ClientIdentity
from tui.core.trace_context import continue_or_start
from tui.otel import conventions as C
from tui.otel.spans import SpanData, span_of

pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs it")
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.resources import Resource  # noqa: E402

from tui.otel.export import OtelExporter  # noqa: E402
from tui.otel.send import SpanSender  # noqa: E402

RESOURCE = Resource.create({"service.name": "infertop", "service.version": "0.test"})


@pytest.fixture(scope="module")
def sender():
    s = SpanSender("http://127.0.0.1:9/v1/traces", 1.0, RESOURCE)
    yield s
    s.shutdown()


def _with_ids(span: SpanData, n: int) -> SpanData:
    span.trace_id = span.trace_id or f"{n + 1:032x}"
    span.span_id = span.span_id or f"{n + 1:016x}"
    return span


def _both(sender: SpanSender, spans: list[SpanData]) -> tuple[bytes, bytes]:
    ours = sender.wire.request([sender.encode(s) for s in spans])
    sdks = encode_spans([sender.readable(s) for s in spans]).SerializePartialToString()
    return ours, sdks


def _outcomes() -> list:
    ctx = continue_or_start("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    own = continue_or_start(None)
    estimated = metrics(
        output_tokens=7,
        output_tokens_source="chunk-count-estimate",
        reasoning_tokens=3,
        reasoning_tokens_source="chunk-count-estimate",
        thinking_ms=12.5,
        itl_token_ms=[1.0, 3.0],
        itl_token_weights=[2, 1],
        itl_token_estimated=True,
    )
    return [
        outcome(1),
        outcome(2, trace_id=ctx.trace_id, span_id=ctx.span_id, parent_span_id=ctx.parent_id),
        outcome(3, trace_id=own.trace_id, span_id=own.span_id),
        outcome(4, state="failed", error_kind="http", metrics=metrics(error="HTTP 500: ✗")),
        outcome(5, state="failed", error_kind=None, metrics=metrics(error=None)),
        outcome(6, state="cancelled", streamed=False, upstream="llama.cpp", truth=None),
        outcome(7, metrics=estimated, model="módel ✓ 模型", response_model="m@2"),
        outcome(8, client=ClientIdentity(user="alice"), kind="vllm", route="/v1/completions"),
        outcome(9, truth=EngineTruth(prompt_tokens=2**40, decode_ms=-0.0, source="x")),
        outcome(10, model="", upstream="https://[::1]/v1", response_model=None),
    ]


def test_our_bytes_are_the_sdks_for_every_kind_of_request(sender) -> None:
    spans = [_with_ids(span_of(o), n) for n, o in enumerate(_outcomes())]
    content = {C.GEN_AI_INPUT_MESSAGES: '[{"role":"user"}]', C.GEN_AI_OUTPUT_MESSAGES: "x" * 300}
    spans.append(_with_ids(span_of(outcome(11, source="chat"), content), 11))
    ours, sdks = _both(sender, spans)
    assert ours == sdks  # byte for byte
    decoded = ExportTraceServiceRequest.FromString(ours)
    assert decoded == ExportTraceServiceRequest.FromString(sdks)
    got = decoded.resource_spans[0].scope_spans[0].spans
    assert [s.name for s in got] == [s.name for s in spans]
    assert got[1].parent_span_id.hex() == spans[1].parent_id and got[1].flags == 0x300
    assert got[3].status.code == 2 and got[3].status.message == "HTTP 500: ✗"
    # the same bytes again from the kept (key, value) encodings
    assert _both(sender, spans)[0] == ours


_values = st.one_of(
    st.text(max_size=40),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.lists(st.text(max_size=8), max_size=4),
)


@settings(max_examples=150, deadline=None)
@given(attributes=st.dictionaries(st.text(min_size=1, max_size=30), _values, max_size=12))
def test_any_attributes_encode_as_the_sdk_encodes_them(attributes) -> None:
    span = SpanData("chat m", "ab" * 16, "cd" * 8, None, 1, 2, dict(attributes))
    s = SpanSender("http://127.0.0.1:9/v1/traces", 1.0, RESOURCE)
    try:
        ours, sdks = _both(s, [span, span])  # the second from the kept encodings
        assert ours == sdks
    finally:
        s.shutdown()


def test_a_span_attribute_equal_to_a_resource_attribute_is_a_span_attribute(sender) -> None:
    # the kept encodings are per field: the resource's service.name is field 1 of its
    # Resource, the same pair on a span field 9 of its Span (and a double's kept head too)
    span = _with_ids(span_of(outcome(1)), 1)
    span.attributes["service.name"] = "infertop"
    span.attributes["service.version"] = "0.test"
    ours, sdks = _both(sender, [span, span])
    assert ours == sdks
    got = ExportTraceServiceRequest.FromString(ours).resource_spans[0].scope_spans[0].spans[0]
    assert {kv.key: kv.value.string_value for kv in got.attributes}["service.name"] == "infertop"


def test_hostile_strings_and_values_cost_an_attribute_never_the_batch(sender) -> None:
    # a lone surrogate (JSON's "\\ud800" makes one): the SDK cannot encode the batch at all
    bad = _with_ids(span_of(replace(outcome(1), model="m\ud800x")), 1)
    bad.attributes["too.big"] = 2**64
    bad.attributes["a.set"] = {1, 2}  # type: ignore[assignment]
    bad.attributes["nan"] = math.nan
    with pytest.raises(UnicodeEncodeError):  # the model name: protobuf strings are UTF-8
        encode_spans([sender.readable(bad)]).SerializePartialToString()
    good = _with_ids(span_of(outcome(2)), 2)
    decoded = ExportTraceServiceRequest.FromString(
        sender.wire.request([sender.encode(bad), sender.encode(good)])
    )
    first, second = decoded.resource_spans[0].scope_spans[0].spans
    attrs = {kv.key: kv.value for kv in first.attributes}
    assert first.name == "chat m?x" and attrs[C.GEN_AI_REQUEST_MODEL].string_value == "m?x"
    assert "too.big" not in attrs and "a.set" not in attrs and math.isnan(attrs["nan"].double_value)
    assert second.name == "chat smollm2"


def test_the_exporter_encodes_and_both_ways_reach_the_receiver_alike() -> None:
    sink, done = OtlpSink(), _outcomes()
    try:
        ours = OtelExporter(sink.url, flush_s=0.1, metrics=False)
        assert ours._sender.encodes  # the pinned SDK has the client for encoded bytes
        sdks = OtelExporter(sink.url, flush_s=0.1, metrics=False)
        sdks._sender.post = None  # an SDK without it: its own encoding
        for ex in (ours, sdks):
            for o in done:
                ex.publish(o)
            assert ex.flush(10)
            ex.close()
        n = len(done)
        assert ours.stats.spans_exported == sdks.stats.spans_exported == n
    finally:
        sink.stop()
    first, second = sink.spans[:n], sink.spans[n:]
    assert len(second) == n
    for a, b in zip(first, second):
        # made ids differ between the two exporters where the outcome had none
        for key in ("trace_id", "span_id"):
            a.pop(key), b.pop(key)
        assert a == b
