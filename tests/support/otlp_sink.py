"""An OTLP/HTTP receiver for tests: decodes what an exporter sends with
``opentelemetry-proto`` (ExportTraceServiceRequest, ExportMetricsServiceRequest), keeps
the spans and the latest cumulative histograms, and serves the histograms in the
Prometheus text format at ``GET /metrics`` (so a real Prometheus can scrape them), named
as the OpenTelemetry-to-Prometheus rules name them (dots to underscores, unit ``s`` →
``_seconds``; an annotation unit such as ``{token}`` adds nothing).

It can also misbehave on purpose: ``status`` (answer every export with it, e.g. 500) and
``hang`` (read the request, then answer nothing for that many seconds).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Histogram:
    name: str
    unit: str
    attributes: dict[str, Any]
    bounds: list[float]
    counts: list[int]
    count: int
    sum: float


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def prometheus_name(name: str, unit: str) -> str:
    base = name.replace(".", "_")
    return base + "_seconds" if unit == "s" else base


@dataclass
class OtlpSink:
    status: int = 200
    hang: float = 0.0
    spans: list[dict[str, Any]] = field(default_factory=list)
    histograms: dict[tuple[str, tuple[tuple[str, Any], ...]], Histogram] = field(
        default_factory=dict
    )
    requests: int = 0
    resource: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as collectors keep connections

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                with sink.lock:
                    sink.requests += 1
                if sink.hang:
                    time.sleep(sink.hang)
                if sink.status == 200:
                    sink._take(self.path, body)
                self.send_response(sink.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                text = sink.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _take(self, path: str, body: bytes) -> None:
        if path == "/v1/traces":
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                ExportTraceServiceRequest,
            )

            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            with self.lock:
                for rs in req.resource_spans:
                    self.resource = _attrs(rs.resource.attributes)
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            self.spans.append(
                                {
                                    "name": s.name,
                                    "kind": s.kind,
                                    "trace_id": s.trace_id.hex(),
                                    "span_id": s.span_id.hex(),
                                    "parent_id": s.parent_span_id.hex() or None,
                                    "start_ns": s.start_time_unix_nano,
                                    "end_ns": s.end_time_unix_nano,
                                    "status": s.status.code,
                                    "attributes": _attrs(s.attributes),
                                    "scope": ss.scope.name,
                                    "schema_url": ss.schema_url,
                                }
                            )
        elif path == "/v1/metrics":
            from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
                ExportMetricsServiceRequest,
            )

            req = ExportMetricsServiceRequest()
            req.ParseFromString(body)
            with self.lock:
                for rm in req.resource_metrics:
                    for sm in rm.scope_metrics:
                        for m in sm.metrics:
                            if m.WhichOneof("data") != "histogram":
                                continue
                            for p in m.histogram.data_points:
                                attrs = _attrs(p.attributes)
                                key = (m.name, tuple(sorted(attrs.items())))
                                self.histograms[key] = Histogram(
                                    m.name,
                                    m.unit,
                                    attrs,
                                    list(p.explicit_bounds),
                                    list(p.bucket_counts),
                                    p.count,
                                    p.sum,
                                )

    def histogram_list(self, name: str) -> list[Histogram]:
        with self.lock:
            return [h for (n, _), h in self.histograms.items() if n == name]

    def exposition(self) -> str:
        """The histograms as Prometheus text (cumulative buckets)."""
        out: list[str] = []
        with self.lock:
            hists = list(self.histograms.values())
        typed: set[str] = set()
        for h in hists:
            name = prometheus_name(h.name, h.unit)
            if name not in typed:
                typed.add(name)
                out.append(f"# TYPE {name} histogram")
            labels = ",".join(
                f'{k.replace(".", "_")}="{str(v)}"' for k, v in sorted(h.attributes.items())
            )
            running = 0
            for bound, n in zip(h.bounds, h.counts):
                running += n
                out.append(f'{name}_bucket{{{labels},le="{bound:g}"}} {running}')
            out.append(f'{name}_bucket{{{labels},le="+Inf"}} {h.count}')
            out.append(f"{name}_sum{{{labels}}} {h.sum!r}")
            out.append(f"{name}_count{{{labels}}} {h.count}")
        return "\n".join(out) + "\n"
