"""What one OTLP POST costs the export thread: the SDK's client sending through
``requests`` (its own transport) ÷ through tui/otel/plain_post.py, in one run.

Both clients are the SDK's ``_OTLPHTTPClient`` (headers, compression, retries: the same
code); only the transport differs. They POST the same encoded batch (``--spans`` spans
of a proxied request each, tests/support/made_outcomes.py's, as tui/otel/otlp_wire.py
encodes them) to one
loopback collector on its own process (tests/support/otlp_sink.py, which decodes every
batch: the bytes are checked to be OTLP spans), alternately, ``--rounds`` rounds of
``--posts`` POSTs each; CPU is this thread's (``time.thread_time``: the collector's work
is in another process). Per round requests ÷ plain; the median and the range.

    .venv/bin/python -m benchmarks.otel_post              # ~20 s
    .venv/bin/python -m benchmarks.otel_post --smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import smoke

ROOT = Path(__file__).resolve().parents[1]

SINK = r"""
import sys, time
from tests.support.otlp_sink import OtlpSink
sink = OtlpSink()
print(sink.url, flush=True)
for line in sys.stdin:
    print(len(sink.spans), flush=True)
"""


def encoded_batch(spans: int) -> bytes:
    """``spans`` spans of proxied requests, as infertop's export encodes them."""
    from opentelemetry.sdk.resources import Resource

    from tests.support.made_outcomes import outcome
    from tui.core.trace_context import new_span_id, new_trace_id
    from tui.otel.send import SpanSender
    from tui.otel.spans import span_of

    sender = SpanSender("http://127.0.0.1:9/v1/traces", 1.0, Resource.create({}))
    encoded = []
    for n in range(spans):
        span = span_of(outcome(n))
        span.trace_id, span.span_id = new_trace_id(), new_span_id()
        encoded.append(sender.encode(span))
    sender.shutdown()
    return bytes(sender.wire.request(encoded))


def client_for(url: str, plain: bool) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from tui.otel.plain_post import use_plain_post

    ex = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
    if plain:
        assert use_plain_post(ex), "plain_post did not take the endpoint"
    return ex


def cpu_per_post(client: Any, payload: bytes, posts: int) -> float:
    t0 = time.thread_time()
    for _ in range(posts):
        result = client._client.export(payload)
        assert result.success, result
    return (time.thread_time() - t0) / posts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--posts", type=int, default=50, help="POSTs a transport a round")
    ap.add_argument("--spans", type=int, default=16, help="spans a batch")
    smoke.add_flag(ap)
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.posts, args.spans = 2, 5, 4
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    sink = subprocess.Popen(
        [sys.executable, "-P", "-c", SINK],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert sink.stdin is not None and sink.stdout is not None
    try:
        url = sink.stdout.readline().strip().rstrip("/")
        payload = encoded_batch(args.spans)
        clients = {"requests": client_for(url, False), "plain": client_for(url, True)}
        for c in clients.values():  # connections made, code warm
            cpu_per_post(c, payload, 3)
        ratios: list[float] = []
        per: dict[str, list[float]] = {name: [] for name in clients}
        for r in range(args.rounds):
            order = list(clients) if r % 2 == 0 else list(reversed(clients))
            got = {name: cpu_per_post(clients[name], payload, args.posts) for name in order}
            for name, v in got.items():
                per[name].append(v)
            ratios.append(got["requests"] / got["plain"])
        sink.stdin.write("count\n")
        sink.stdin.flush()
        received = int(sink.stdout.readline())
    finally:
        sink.kill()
    sent = (args.rounds * args.posts + 3) * 2 * args.spans
    print(
        f"otel_post: {len(payload)} bytes a batch ({args.spans} spans), "
        f"{args.rounds} rounds of {args.posts} POSTs a transport, alternating"
    )
    for name, values in per.items():
        print(f"  {name:9} {statistics.median(values) * 1e6:8.1f} µs of CPU a POST (median)")
    print(
        f"  requests ÷ plain_post: median {statistics.median(ratios):.2f} "
        f"(rounds {min(ratios):.2f}–{max(ratios):.2f})"
    )
    print(f"  the collector decoded {received} spans of {sent} sent")
    if args.smoke:
        smoke.check(received == sent, f"the collector got {received} spans of {sent}")
        smoke.passed("both transports POSTed OTLP batches the collector decoded")


if __name__ == "__main__":
    main()
