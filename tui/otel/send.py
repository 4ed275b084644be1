"""Spans to the collector, over OTLP/HTTP with the OpenTelemetry SDK's exporter.

:class:`SpanSender` holds the SDK's ``OTLPSpanExporter`` — it resolves the endpoint,
headers, compression, TLS, timeout and retries from its arguments and the standard
``OTEL_EXPORTER_OTLP_*`` variables, and owns the HTTP connection — and sends a batch of
:class:`~tui.otel.spans.SpanData` one of two ways:

- encoded here (tui/otel/otlp_wire.py: the bytes the SDK's encoder would make, ~6×
  cheaper) and handed to the exporter's own HTTP client, ``export(bytes)``: what the
  exporter's ``export(spans)`` does after encoding (opentelemetry-exporter-otlp-proto-http
  1.45 keeps that client as ``_client``; :func:`encoded_sender` finds it at start);
- with an SDK that has no such client, the SDK's own way: a ``ReadableSpan`` each, and
  the exporter's ``export(spans)`` encodes them.

Either way a batch over :data:`MAX_REQUEST_BYTES` is not sent (the SDK's own limit). To a
plain ``http://`` collector with no proxy in the way, the exporter's client sends through
tui/otel/plain_post.py instead of ``requests`` (~5× less CPU a POST; the SDK's retries,
headers and compression kept).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from tui.otel import conventions as C
from tui.otel.otlp_wire import TraceEncoder
from tui.otel.plain_post import use_plain_post
from tui.otel.spans import SpanData

MAX_REQUEST_BYTES: Final = 64 << 20  # an encoded batch at most (the SDK's own default)


def encoded_sender(exporter: Any) -> Callable[[bytes], Any] | None:
    """The SDK span exporter's own HTTP client's ``export(bytes)`` (an encoded OTLP
    request, sent with everything the SDK resolved, retried as it retries); None for an
    SDK that has none."""
    send = getattr(getattr(exporter, "_client", None), "export", None)
    return send if callable(send) else None


@dataclass(frozen=True)
class Failure:
    """Why a batch did not go through; ``unreachable``: no answer came at all (nothing
    listening, no route, a timeout), as opposed to an answer that refused it."""

    why: str
    unreachable: bool = False


def failure_of(result: Any) -> Failure | None:
    """None when the SDK client's result says the collector took the request, else why
    not."""
    if getattr(result, "success", False) is True:
        return None
    status, error = getattr(result, "status_code", None), getattr(result, "error", None)
    if status is not None:
        return Failure(f"the collector answered HTTP {status}")
    if error is not None:
        return Failure(f"{type(error).__name__}: {error}", unreachable=True)
    return Failure("the collector did not take the batch")


class SpanSender:
    """One collector's traces endpoint (``traces_url`` None: the SDK's, from the
    environment); ``resource``: the SDK ``Resource`` every span names."""

    def __init__(self, traces_url: str | None, timeout_s: float, resource: Any) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        from tui import __version__

        self.resource = resource
        self.exporter: Any = OTLPSpanExporter(endpoint=traces_url, timeout=timeout_s)
        self.plain_post = use_plain_post(self.exporter)
        self.post = encoded_sender(self.exporter)
        self.wire = TraceEncoder(
            dict(resource.attributes),
            C.INSTRUMENTATION_SCOPE,
            __version__,
            C.SCHEMA_URL,
            resource.schema_url,
        )

    @property
    def encodes(self) -> bool:
        """Spans are encoded here (:meth:`encode`), not by the SDK."""
        return self.post is not None

    def encode(self, span: SpanData) -> bytes:
        """One span's bytes, for :meth:`send` (only when :attr:`encodes`)."""
        return self.wire.span(span)

    def send(self, spans: list[SpanData], encoded: list[bytes]) -> Failure | None:
        """One batch (``encoded``: :meth:`encode` of each when :attr:`encodes`); None when
        the collector took it, else why not."""
        if self.post is None:
            return self._send_sdk(spans)
        payload = self.wire.request(encoded)
        if len(payload) > MAX_REQUEST_BYTES:
            return Failure(f"a batch of {len(payload)} bytes, over {MAX_REQUEST_BYTES}")
        try:
            return failure_of(self.post(payload))
        except Exception as e:  # noqa: BLE001 - the exporter's own faults are counted too
            return Failure(f"{type(e).__name__}: {e}")

    def _send_sdk(self, spans: list[SpanData]) -> Failure | None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.exporter.export([self.readable(s) for s in spans])
        except Exception as e:  # noqa: BLE001 - the exporter's own faults are counted too
            return Failure(f"{type(e).__name__}: {e}")
        if result == SpanExportResult.SUCCESS:
            return None
        return Failure("the collector did not take the batch")

    def readable(self, span: SpanData) -> Any:
        """The SDK's ``ReadableSpan`` of a span with its ids (the SDK's way, and what
        tests/otel/test_otlp_wire.py compares the bytes with)."""
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        assert span.trace_id is not None and span.span_id is not None
        trace_id = int(span.trace_id, 16)
        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(trace_id, int(span.span_id, 16), False, flags)
        parent = (
            SpanContext(trace_id, int(span.parent_id, 16), True, flags) if span.parent_id else None
        )
        status = (
            Status(StatusCode.ERROR, span.status_message)
            if span.status == "error"
            else Status(StatusCode.UNSET)
        )
        return ReadableSpan(
            name=span.name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=span.attributes,
            kind=SpanKind.CLIENT,
            status=status,
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=scope(),
        )

    def shutdown(self) -> None:
        self.exporter.shutdown()


def scope() -> Any:
    """The SDK's ``InstrumentationScope`` of infertop's spans and metrics."""
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from tui import __version__

    return InstrumentationScope(C.INSTRUMENTATION_SCOPE, __version__, C.SCHEMA_URL)
