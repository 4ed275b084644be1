"""OTLP export of finished requests: an :class:`~tui.core.outcome.OutcomeSink` that sends
one GenAI span per request and records the GenAI metrics, over OTLP/HTTP (protobuf),
with the OpenTelemetry SDK (the optional extra ``infertop[otel]``).

Off the request path, bounded: :meth:`OtelExporter.publish` appends the outcome to a
queue of at most ``queue_limit`` (past it the outcome is dropped and counted) and
returns — nothing else is done per request, nothing per token, on the request's path.
One thread of its own wakes every ``flush_s`` (5 s, the SDK's batch processor's delay;
sooner when ``batch`` outcomes wait, or at :meth:`OtelExporter.flush`), turns the queued
outcomes into metric points and spans (encoded as tui/otel/send.py says) and sends them,
``batch`` (512) to a request. A collector that is down, slow or refusing costs that
thread its export timeout; the batch is dropped and counted (:attr:`stats`), never
kept, and the next ones are dropped unbuilt for a back-off (tui/otel/rhythm.py): memory
stays bounded whatever the collector does, and a dead one costs a count, not an
encoding. A collector down at start is no error — nothing is sent until a request ends.
The metrics (cumulative histograms with the conventions' bucket boundaries) are kept by
infertop itself (tui/otel/aggregate.py says why) and sent by the same thread every
``metric_interval_s``, and at a flush or the end; a failed metrics export rests too
(the next one carries the totals: nothing is lost by skipping one).

Where: ``endpoint`` is the collector's base URL (``http://host:4318``: traces to
``/v1/traces``, metrics to ``/v1/metrics``), or ``"env"`` to take every endpoint from
the standard ``OTEL_EXPORTER_OTLP_*`` variables; the SDK honours the others as well
(``_HEADERS`` for an API key, ``_TIMEOUT``, ``_COMPRESSION``, ``_CERTIFICATE``;
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` for the resource).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from tui.core.outcome import RequestOutcome
from tui.core.trace_context import new_span_id, new_trace_id
from tui.otel import conventions as C
from tui.otel.aggregate import HistogramTable
from tui.otel.measures import AttributeSets, each_point
from tui.otel.plain_post import use_plain_post
from tui.otel.rhythm import Backoff, batch_settings
from tui.otel.send import SpanSender, scope
from tui.otel.spans import SpanData, span_of

CONTENT_KEPT: Final = 64  # requests whose captured content waits for its outcome
EXTRA: Final = "pip install 'infertop[otel]'"
SUPPORTED_PROTOCOL: Final = "http/protobuf"
log = logging.getLogger(__name__)


class OtelUnavailable(Exception):
    """OTLP export was asked for and cannot be had (no SDK, a bad endpoint or protocol);
    the message is one line for the user."""


@dataclass
class ExportStats:
    """What the exporter did: spans sent, spans dropped (queue full or a batch the
    collector did not take), batches that failed, and the last failure in words."""

    spans_exported: int = 0
    spans_dropped: int = 0
    batches_failed: int = 0
    last_error: str | None = None
    metric_failures: int = 0  # metric exports the collector did not take


def signal_endpoints(endpoint: str) -> tuple[str | None, str | None]:
    """(traces URL, metrics URL) of ``--otlp``'s value: a base URL gets ``/v1/traces``
    and ``/v1/metrics``; a URL that already ends in one of them is taken as the base
    with it; ``"env"``: (None, None), the SDK reads ``OTEL_EXPORTER_OTLP_*``.
    OtelUnavailable for anything that is not an http(s) URL."""
    if endpoint == "env":
        return None, None
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OtelUnavailable(
            f"--otlp {endpoint!r}: an http:// or https:// URL of an OTLP/HTTP collector "
            "(e.g. http://127.0.0.1:4318), or 'env' for the OTEL_EXPORTER_OTLP_* variables"
        )
    base = endpoint.strip().rstrip("/")
    for tail in ("/v1/traces", "/v1/metrics"):
        if base.endswith(tail):
            base = base[: -len(tail)]
    return base + "/v1/traces", base + "/v1/metrics"


def check_protocol(environ: dict[str, str] | None = None) -> None:
    """OtelUnavailable when the environment asks for an OTLP protocol infertop does not
    send (it sends http/protobuf only)."""
    env = os.environ if environ is None else environ
    for name in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        value = env.get(name, "").strip()
        if value and value != SUPPORTED_PROTOCOL:
            raise OtelUnavailable(
                f"{name}={value}: infertop exports OTLP over HTTP ({SUPPORTED_PROTOCOL}) "
                "only; point it at the collector's HTTP port (4318)"
            )


def sdk_disabled(environ: dict[str, str] | None = None) -> bool:
    """``OTEL_SDK_DISABLED=true``: the user turned OpenTelemetry off everywhere."""
    env = os.environ if environ is None else environ
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


class OtelExporter:
    """The OTLP sink (see the module docstring). ``capture_content``: spans of the user's
    own chat carry the prompt and answer given by :meth:`attach_content` (the proxy never
    gives any). ``server_metrics``: also the gen_ai.server.* metrics (the proxy)."""

    def __init__(
        self,
        endpoint: str,
        *,
        capture_content: bool = False,
        queue_limit: int | None = None,
        flush_s: float | None = None,
        batch: int | None = None,
        metric_interval_s: float = 10.0,
        timeout_s: float = 5.0,
        metrics: bool = True,
        note: Any = None,
    ) -> None:
        check_protocol()
        traces_url, metrics_url = signal_endpoints(endpoint)
        try:
            import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
            from opentelemetry.sdk.resources import Resource
        except ImportError:
            raise OtelUnavailable(
                f"OTLP export needs the OpenTelemetry SDK, which is not installed: {EXTRA}"
            ) from None
        # The SDK's own export logs go quiet: a failing collector is said once, by us.
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
        logging.getLogger("opentelemetry.sdk").setLevel(logging.ERROR)
        from tui import __version__

        self.endpoint = endpoint
        self.capture_content = capture_content
        env = batch_settings()
        self.queue_limit = env.queue if queue_limit is None else queue_limit
        self.flush_s = env.flush_s if flush_s is None else flush_s
        self.batch = env.batch if batch is None else batch
        self.stats = ExportStats()
        self.note = note
        self._noted_failure = False
        self.resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "infertop",
             "service.version": __version__}
        )  # fmt: skip
        self._sender = SpanSender(traces_url, timeout_s, self.resource)
        self._queue: deque[RequestOutcome] = deque()
        self._content: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._flush_waiters: list[threading.Event] = []
        first = max(1.0, self.flush_s)
        self._spans_rest = Backoff(first)  # after a batch of spans the collector refused
        self._metrics_rest = Backoff(first)  # after metrics it refused (or failed)
        self._unreachable = Backoff(first)  # after no answer at all: both signals rest
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._sets = AttributeSets()
        self._table: HistogramTable | None = None
        self._metrics: Any = None  # the OTLP/HTTP metric exporter
        self.metric_interval_s = metric_interval_s
        self._next_metrics = time.monotonic() + metric_interval_s
        if metrics:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )

            self._table = HistogramTable(C.METRICS)
            self._metrics = OTLPMetricExporter(endpoint=metrics_url, timeout=timeout_s)
            use_plain_post(self._metrics)
        self._thread = threading.Thread(target=self._run, name="infertop-otlp", daemon=True)
        self._thread.start()

    # -- OutcomeSink ----------------------------------------------------------------------
    def publish(self, outcome: RequestOutcome) -> None:
        """Queue one outcome (the request's path: O(1), never blocks on the network)."""
        with self._lock:
            if len(self._queue) >= self.queue_limit:
                self.stats.spans_dropped += 1
                return
            self._queue.append(outcome)
            if len(self._queue) >= self.batch:
                self._wake.set()

    def room(self) -> int:
        """How many more outcomes the queue takes before it drops (Outcomes.publish_many
        waits on it)."""
        return self.queue_limit - len(self._queue)

    def attach_content(self, request_id: str, input_json: str, output_json: str) -> None:
        """The prompt and answer of the user's own request ``request_id`` (chat, run), as
        the conventions' message JSON; used only with ``capture_content`` on, and only for
        an outcome whose source is the chat or run."""
        if not self.capture_content:
            return
        with self._lock:
            self._content[request_id] = {
                C.GEN_AI_INPUT_MESSAGES: input_json,
                C.GEN_AI_OUTPUT_MESSAGES: output_json,
            }
            while len(self._content) > CONTENT_KEPT:
                self._content.popitem(last=False)

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (within ``timeout_s``), then stop (once: a second call
        does nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout_s)
        for exporter in (self._sender, self._metrics):
            try:
                if exporter is not None:
                    exporter.shutdown()
            except Exception:  # noqa: BLE001 - closing must not fail the front end
                pass

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Export what is queued now and the metrics' current values (tests, and the end
        of ``infertop run``); True when the spans went through (the metrics' failures are
        counted and said apart: a receiver of traces only takes none)."""
        done = threading.Event()
        with self._lock:
            self._flush_waiters.append(done)
        self._wake.set()
        return done.wait(timeout_s) and self.stats.last_error is None

    # -- the export thread ----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wake.wait(self.flush_s)
            self._wake.clear()
            stopping = self._stop.is_set()
            waiters: list[threading.Event] = []
            while True:
                with self._lock:
                    n = min(self.batch, len(self._queue))
                    batch = [self._queue.popleft() for _ in range(n)]
                    waiters += self._flush_waiters
                    self._flush_waiters = []
                    content = {o.id: self._content.pop(o.id, None) for o in batch}
                if batch:
                    self._export(batch, content)
                with self._lock:
                    if not self._queue:
                        break
            now = time.monotonic()
            due = now >= self._next_metrics and not (
                self._metrics_rest.resting(now) or self._unreachable.resting(now)
            )
            if self._table is not None and (stopping or waiters or due):
                self._next_metrics = now + self.metric_interval_s
                self._export_metrics()
            for w in waiters:
                w.set()
            if stopping:
                return

    def _export_metrics(self) -> None:
        """The histograms as they stand, cumulative (tui/otel/aggregate.py)."""
        from opentelemetry.sdk.metrics.export import MetricExportResult

        assert self._table is not None
        if not len(self._table):
            return
        data = self._table.metrics_data(self.resource, scope(), C.SCHEMA_URL)
        try:
            result = self._metrics.export(data)
        except Exception:  # noqa: BLE001 - counted as a failure, as a batch of spans is
            result = None
        if result == MetricExportResult.SUCCESS:
            self._metrics_rest.reset()
            return
        self._metrics_rest.failed(time.monotonic())
        self.stats.metric_failures += 1
        if self.stats.metric_failures == 1 and self.note is not None:
            self.note(
                f"OTLP metrics to {self.endpoint} were not taken (a receiver of traces only, "
                "such as Phoenix, takes none); spans go on, metrics are kept and sent again"
            )

    def _export(self, batch: list[RequestOutcome], content: dict[str, Any]) -> None:
        # after a failed batch, the next ones are dropped unbuilt until the back-off ends
        # (1 s, doubling to 60 s): a dead collector costs no encoding, only a count
        now = time.monotonic()
        resting = self._spans_rest.resting(now) or self._unreachable.resting(now)
        encode = self._sender.encode if self._sender.encodes else None
        record = None if self._table is None else self._table.record
        spans: list[SpanData] = []
        encoded: list[bytes] = []
        for o in batch:
            try:
                if record is not None:
                    each_point(o, self._sets, record)
                if not resting:
                    own = self.capture_content and o.source in ("chat", "run")
                    span = span_of(o, content.get(o.id) if own else None)
                    span.trace_id = span.trace_id or new_trace_id()
                    span.span_id = span.span_id or new_span_id()
                    if encode is not None:
                        encoded.append(encode(span))
                    spans.append(span)
            except Exception as e:  # noqa: BLE001 - one bad outcome must not stop export
                log.warning("could not export request %s: %s", o.id, e)
        if resting:
            self.stats.spans_dropped += len(batch)
            return
        if not spans:
            return
        failure = self._sender.send(spans, encoded)
        if failure is None:
            self.stats.spans_exported += len(spans)
            self.stats.last_error = None
            self._spans_rest.reset()
            self._unreachable.reset()
            return
        why = failure.why
        self.stats.spans_dropped += len(spans)
        self.stats.batches_failed += 1
        self.stats.last_error = why
        rest = self._unreachable if failure.unreachable else self._spans_rest
        rest.failed(time.monotonic())
        if not self._noted_failure and self.note is not None:
            self._noted_failure = True
            self.note(
                f"OTLP export to {self.endpoint} failed ({why}); batches are dropped and "
                "counted while it fails"
            )

    def exposition(self) -> str:
        """The exporter's counts in the Prometheus text format (for /infertop/metrics)."""
        s = self.stats
        with self._lock:
            queued = len(self._queue)
        lines = []
        for name, kind, value, text in (
            ("spans_exported_total", "counter", s.spans_exported, "Spans the collector took."),
            ("spans_dropped_total", "counter", s.spans_dropped, "Spans dropped (queue full or "
             "a batch the collector did not take)."),
            ("export_failures_total", "counter", s.batches_failed, "Span batches that failed."),
            ("queued", "gauge", queued, "Finished requests waiting for export."),
        ):  # fmt: skip
            lines += [
                f"# HELP infertop_otel_{name} {text}",
                f"# TYPE infertop_otel_{name} {kind}",
                f"infertop_otel_{name} {value}",
            ]
        return "\n".join(lines) + "\n"
