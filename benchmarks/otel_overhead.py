"""What OTLP export costs `infertop proxy`: the proxy's added TTFT and its CPU per
forwarded token with export on — to a live collector, and to a dead one — ÷ with it off,
measured in one run, the paths interleaved.

Four paths to one pace server (tests/support/pace_server.py, its own process): direct;
``ours`` (`infertop proxy`, no export); ``ours+otlp`` (``--otlp`` to a live OTLP/HTTP
receiver in this process, tests/support/otlp_sink.py, which decodes every batch); and
``ours+dead`` (``--otlp`` to a loopback port nobody listens on: every batch fails). The
measures are benchmarks/proxy_overhead.py's: added TTFT p50 (a path's TTFT p50 − direct's,
the client's own cost cancelled out), the same less the pace server's own wait (way in +
first token's way out: its timer's jitter taken out), and the proxy process's CPU per
forwarded token (utime + stime from /proc, export thread included), alternating rounds.

Checked that the workload happened as meant: every request through ``ours+otlp`` reached
the receiver as a span (its count against the requests sent), and ``ours+dead`` exported
none and counted its drops (its /infertop/metrics).

    .venv/bin/python -m benchmarks.otel_overhead            # ~2 min
    .venv/bin/python -m benchmarks.otel_overhead --quick    # a smoke run

Goal (issue 51): export on ÷ off ≤ 1.05 for the added TTFT p50 and the CPU per token.
Export costs per *request* (a span: ~100 µs of Python to build and encode, most of it the
SDK's protobuf encoding of ~25 attributes; the metric points ~0.3 µs a value), so its cost
per token depends on the answers' length: the default is 256 output tokens a request;
``--tokens 32`` shows short answers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.proxy_overhead import added, measure_cpu, measure_latency
from benchmarks.proxy_paths import Servers, free_port, wait_up
from tests.support.fake_server import support_command, support_env
from tests.support.otlp_sink import OtlpSink
from tui.core.stats import median, percentile

ROOT = Path(__file__).resolve().parents[1]


def _ours(pace: str, extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "tui", "proxy", "--upstream", pace, "--listen",
           f"127.0.0.1:{port}", "--kind", "openai", *extra]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    wait_up(url + "/infertop/health")
    return proc, url


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(interval_ms: float, concurrency: int, sink: OtlpSink) -> Servers:
    procs: list[subprocess.Popen[bytes]] = []
    pace_port = free_port()
    procs.append(
        subprocess.Popen(
            [
                *support_command("pace_server"),
                "--port",
                str(pace_port),
                "--interval-ms",
                str(interval_ms),
                "--ttft-ms",
                "20",
                "--concurrency",
                str(concurrency),
                "--stamps-kept",
                "4096",
            ],
            stdout=subprocess.DEVNULL,
            env=support_env(),
        )  # fmt: skip
    )
    pace = f"http://127.0.0.1:{pace_port}"
    wait_up(pace + "/health")
    paths, pids = {"direct": pace}, {}
    for name, extra in (
        ("ours", []),
        ("ours+otlp", ["--otlp", sink.url]),
        ("ours+dead", ["--otlp", f"http://127.0.0.1:{_closed_port()}"]),
    ):
        proc, paths[name] = _ours(pace, extra)
        procs.append(proc)
        pids[name] = [proc.pid]
    return Servers(pace, paths, pids, procs)


def otel_counts(url: str) -> dict[str, float]:
    import urllib.request

    with urllib.request.urlopen(url + "/infertop/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("infertop_otel_"):
            name, _, value = line.partition(" ")
            out[name] = float(value)
    return out


def export_cpu_per_request(tokens: int, n: int = 512) -> float:
    """µs of CPU (this process's, by process_time: insensitive to other load) to turn one
    finished request of ``tokens`` output tokens into its span, encoded as OTLP protobuf,
    and its metric points: the export thread's work per request, without the network."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tests.support.made_outcomes import metrics, outcome
    from tui.otel.aggregate import HistogramTable
    from tui.otel.conventions import METRICS
    from tui.otel.export import OtelExporter
    from tui.otel.measures import BoundedModels, points_of
    from tui.otel.spans import span_of

    gaps = [10.0] * (tokens - 1)
    done = [outcome(i, metrics=metrics(itl_chunk_ms=gaps, itl_token_ms=gaps)) for i in range(n)]
    ex = OtelExporter(f"http://127.0.0.1:{_closed_port()}", metrics=False)
    table, models = HistogramTable(METRICS), BoundedModels()
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        spans = [ex._readable(span_of(o)) for o in done]
        encode_spans(spans).SerializePartialToString()
        for o in done:
            for spec, values, attrs in points_of(o, models):
                table.record(spec, values, attrs)
        best = min(best, (time.process_time() - t0) / n * 1e6)
    ex.close(0.5)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    ap.add_argument("--interval-ms", type=float, default=2.0)
    ap.add_argument("--cpu-streams", type=int, default=16)
    ap.add_argument("--cpu-requests", type=int, default=200)
    ap.add_argument("--cpu-rounds", type=int, default=4)
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.cpu_requests, a.cpu_rounds = 6, 48, 2
    print(f"load before: {os.getloadavg()[0]:.2f} (uptime's 1-minute average); "
          f"{a.tokens} output tokens a request")  # fmt: skip
    sink = OtlpSink()
    servers = start(a.interval_ms, max(64, a.cpu_streams), sink)
    try:
        t0 = time.monotonic()
        lat = asyncio.run(measure_latency(servers, 1, a.tokens, a.rounds))
        cpu = asyncio.run(
            measure_cpu(servers, a.cpu_streams, a.tokens, a.cpu_requests, a.cpu_rounds)
        )
        time.sleep(3.0)  # the last batches leave (flush every second)
        live, dead = (
            otel_counts(servers.paths["ours+otlp"]),
            otel_counts(servers.paths["ours+dead"]),
        )
        took = time.monotonic() - t0
    finally:
        servers.stop()
        sink.stop()
    sent_live = (a.rounds + 1) + a.cpu_requests * a.cpu_rounds
    print(f"load after: {os.getloadavg()[0]:.2f}; measured in {took:.0f} s\n")
    print("1 stream, p50 (ms)            added TTFT   added TTFT less the server's wait")
    base = {
        "ttft": added(lat, "ours", "ttft_ms", 50),
        "path": percentile(lat["ours"].path_ttft_ms, 50),
    }
    for name in ("ours", "ours+otlp", "ours+dead"):
        t, p = added(lat, name, "ttft_ms", 50), percentile(lat[name].path_ttft_ms, 50)
        print(f"  {name:12s}                {t:+8.3f}     {p:8.3f}   failed {lat[name].failed}")
    print("\nCPU per forwarded token (µs, median of rounds)")
    for name in ("ours", "ours+otlp", "ours+dead"):
        rounds = ", ".join(f"{x:.1f}" for x in cpu[name])
        print(f"  {name:12s} {median(cpu[name]):7.2f}   rounds: {rounds}")
    print("\nratios, export on ÷ off (goal ≤ 1.05)")
    for name in ("ours+otlp", "ours+dead"):
        t = added(lat, name, "ttft_ms", 50) / base["ttft"] if base["ttft"] > 0 else float("nan")
        p = percentile(lat[name].path_ttft_ms, 50) / base["path"]
        c = median(cpu[name]) / median(cpu["ours"])
        print(
            f"  {name:12s} added TTFT {t:.3f}   less the server's wait {p:.3f}   CPU/token {c:.3f}"
        )
    per_request = export_cpu_per_request(a.tokens)
    base = median(cpu["ours"])
    print(
        f"\nexport's own CPU per request ({a.tokens} tokens; process time, best of 3): "
        f"{per_request:.1f} µs = {per_request / a.tokens:.2f} µs a token, "
        f"{per_request / a.tokens / base:.1%} of ours' {base:.1f}"
    )
    print("\nthe workload, checked")
    print(f"  live collector: {len(sink.spans)} spans received of {sent_live} requests sent; "
          f"proxy says exported {live.get('infertop_otel_spans_exported_total', 0):.0f}, "
          f"dropped {live.get('infertop_otel_spans_dropped_total', 0):.0f}")  # fmt: skip
    print(f"  dead collector: exported {dead.get('infertop_otel_spans_exported_total', 0):.0f}, "
          f"dropped {dead.get('infertop_otel_spans_dropped_total', 0):.0f}, failed batches "
          f"{dead.get('infertop_otel_export_failures_total', 0):.0f}")  # fmt: skip
    if len(sink.spans) != sent_live or dead.get("infertop_otel_spans_exported_total", 0):
        raise SystemExit("the workload did not happen as meant (see the counts above)")


if __name__ == "__main__":
    main()
