"""What OTLP export costs `infertop proxy`: the proxy's added TTFT and its CPU per
forwarded token with export on — to a live collector, and to a dead one — ÷ with it off,
measured in one run, the paths interleaved.

Paths to one pace server (tests/support/pace_server.py, its own process): direct;
``ours`` (`infertop proxy`, no export); ``ours+otlp`` (``--otlp`` to a live OTLP/HTTP
receiver in this process, tests/support/otlp_sink.py, which decodes every batch); and
``ours+dead`` (``--otlp`` to a loopback port nobody listens on: every batch fails). With
``--before DIR`` (an older checkout: ``git archive otel51 | tar -x -C DIR``) the same
three proxies from that tree too (``before``, ``before+otlp``, ``before+dead``): before
and after in one run. Every proxy runs with ``--no-ledger`` (a benchmark never writes the
user's ledger; the ledger's own cost would also dilute the ratio).

1. Added TTFT, one stream (``--latency-tokens``, 32, a request: requests end often, so
   the export thread has more to do than at 256), the paths in a rotating order each
   round: a path's TTFT p50 − direct's (the client's own cost cancelled out); and the
   same for the path time (the way in + the first token's way out, by the pace server's
   stamps: its timer's jitter taken out). Ratio on ÷ off of those p50s, and — as drift
   between rounds cancels in it — the median of the per-round differences (on − off),
   ÷ off's added p50, with a bootstrap 95 % interval.
2. CPU per forwarded token: ``--cpu-streams`` concurrent streams, ``--cpu-requests`` a
   path per round, the paths in a rotating order, ``--cpu-rounds`` rounds. CPU from
   /proc/PID/task/*/schedstat (ns on the CPU, per thread): the main thread — the request
   path — apart from the others (the export thread, executors). Ratio on ÷ off: the
   median of the per-round ratios (each round's on ÷ the same round's off), with a
   bootstrap 95 % interval, and the ratio of the medians. /proc/PID/stat's total over
   the whole phase (exited threads too) beside it.
3. Export's own CPU per request, in this process by thread time: the exporter's work per
   finished request (metric points, span, its encoding; the send left out), and the
   SDK's encoding of the same spans for comparison.

Checked that the workload happened as meant: every request through a live path reached
its receiver as a span (the count against the requests sent), and a dead path exported
none and counted its drops (its /infertop/metrics).

    .venv/bin/python -m benchmarks.otel_overhead                    # ~6 min
    .venv/bin/python -m benchmarks.otel_overhead --before /tmp/old  # before/after, ~10 min
    .venv/bin/python -m benchmarks.otel_overhead --quick            # a short run
    .venv/bin/python -m benchmarks.otel_overhead --smoke            # seconds: the workload checked

Goal (issue 51): export on ÷ off ≤ 1.05 for the added TTFT p50 and the CPU per token.
Export costs per *request*, so its cost per token depends on the answers' length: the
default is 256 output tokens a request; ``--tokens 32`` shows short answers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import smoke
from benchmarks.proxy_overhead import TIMEOUTS, Result, latency_round, stream_once
from benchmarks.proxy_paths import Servers, cpu_s, free_port, start_pace, wait_up
from tests.support.otlp_sink import OtlpSink
from tui.core.stats import bootstrap_ci, median, percentile
from tui.transport.http1 import Http1Pool

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("", "+otlp", "+dead")
AGAIN = "-again"  # ours once more, no export: the same proxy twice (the noise floor)


def variants(tree: str) -> tuple[str, ...]:
    return (*VARIANTS, AGAIN) if tree == "ours" else VARIANTS


def compared(tree: str) -> tuple[str, ...]:
    """The variants measured against ``tree`` without export."""
    return variants(tree)[1:]


def _proxy(code: Path, pace: str, extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "tui", "proxy", "--upstream", pace, "--listen",
           f"127.0.0.1:{port}", "--kind", "openai", "--no-ledger", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(code)}  # (cwd too: `-m` puts it first)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=code, env=env
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(url + "/infertop/health")
    return proc, url


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    interval_ms: float, concurrency: int, sinks: dict[str, OtlpSink], before: Path | None
) -> Servers:
    procs: list[subprocess.Popen[bytes]] = []
    pace = start_pace(interval_ms, concurrency, procs)
    paths, pids = {"direct": pace}, {}
    trees = [("ours", ROOT)] + ([("before", before)] if before is not None else [])
    for tree, code in trees:
        for variant in variants(tree):
            extra = {
                "": [],
                AGAIN: [],
                "+otlp": ["--otlp", sinks[tree].url],
                "+dead": ["--otlp", f"http://127.0.0.1:{_closed_port()}"],
            }[variant]
            proc, paths[tree + variant] = _proxy(code, pace, extra)
            procs.append(proc)
            pids[tree + variant] = [proc.pid]
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


def settled_counts(
    servers: Servers, names: list[str], wait_s: float = 30.0
) -> dict[str, dict[str, float]]:
    """Each export path's counts once nothing waits in its queue and a dead path has
    counted its first failure (the SDK's retries take up to its 5 s timeout)."""
    deadline = time.monotonic() + wait_s
    while True:
        counts = {n: otel_counts(servers.paths[n]) for n in names}
        settled = all(
            not c.get("infertop_otel_queued", 0)
            and (not n.endswith("+dead") or c.get("infertop_otel_spans_dropped_total", 0))
            for n, c in counts.items()
        )
        if settled or time.monotonic() > deadline:
            return counts
        time.sleep(0.5)


# -- 1. added TTFT ---------------------------------------------------------------------


async def latency_rounds(servers: Servers, tokens: int, rounds: int) -> list[dict[str, Result]]:
    """One Result per path per round (one request each), the order rotating."""
    names = list(servers.paths)
    pools = {n: Http1Pool({"User-Agent": "otel-overhead"}, TIMEOUTS) for n in names}
    seed = [1_000_000]
    await latency_round(pools, servers, names, 1, tokens, {n: Result() for n in names}, seed)
    out = []
    for i in range(rounds):
        order = names[i % len(names) :] + names[: i % len(names)]
        one = {n: Result() for n in names}
        await latency_round(pools, servers, order, 1, tokens, one, seed)
        out.append(one)
    for p in pools.values():
        p.close()
    return out


def _pooled(rounds: list[dict[str, Result]], name: str, attr: str) -> list[float]:
    return [v for r in rounds for v in getattr(r[name], attr)]


def _added(rounds: list[dict[str, Result]], name: str, attr: str) -> float:
    return percentile(_pooled(rounds, name, attr), 50) - percentile(
        _pooled(rounds, "direct", attr), 50
    )


def latency_rows(rounds: list[dict[str, Result]], trees: list[str]) -> list[str]:
    out = ["1 stream, p50 (ms)      added TTFT   added path time (server's wait out)"]
    for tree in trees:
        for v in variants(tree):
            name = tree + v
            failed = sum(r[name].failed for r in rounds)
            out.append(
                f"  {name:12s}          {_added(rounds, name, 'ttft_ms'):+8.3f}     "
                f"{_added(rounds, name, 'path_ttft_ms'):+8.3f}     failed {failed}"
            )
    out.append("\nadded TTFT, export on ÷ off (goal ≤ 1.05): p50s' ratio; paired: 1 + median "
               "of the rounds' (on − off) ÷ off's added p50 [95 % interval]; ours-again: the "
               "same proxy as ours (the noise floor)")  # fmt: skip
    for tree in trees:
        for v in compared(tree):
            cells = []
            for attr, label in (("ttft_ms", "TTFT"), ("path_ttft_ms", "path time")):
                base = _added(rounds, tree, attr)
                diffs = [
                    getattr(r[tree + v], attr)[0] - getattr(r[tree], attr)[0]
                    for r in rounds
                    if getattr(r[tree + v], attr) and getattr(r[tree], attr)
                ]
                ci = bootstrap_ci(diffs)
                cells.append(
                    f"{label} {_added(rounds, tree + v, attr) / base:.3f}, paired "
                    f"{1 + ci.estimate / base:.3f} [{1 + ci.low / base:.3f}, "
                    f"{1 + ci.high / base:.3f}]"
                )
            out.append(f"  {tree + v:12s} " + "   ".join(cells))
    return out


# -- 2. CPU per token ------------------------------------------------------------------


def thread_ns(pid: int) -> tuple[int, int]:
    """(main thread's, the other threads') ns on the CPU so far, from schedstat."""
    main = others = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            ns = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        if int(tid) == pid:
            main = ns
        else:
            others += ns
    return main, others


@dataclass
class Cpu:
    """µs per forwarded token, per round: all threads, the main thread, the others."""

    total: list[float] = field(default_factory=list)
    main: list[float] = field(default_factory=list)
    others: list[float] = field(default_factory=list)
    stat_s: float = 0.0  # /proc/PID/stat over the phase (ticks: exited threads too)
    tokens: int = 0


async def measure_cpu(
    servers: Servers, names: list[str], streams: int, tokens: int, requests: int, rounds: int
) -> dict[str, Cpu]:
    out = {n: Cpu() for n in names}
    pools = {n: Http1Pool({"User-Agent": "otel-overhead"}, TIMEOUTS) for n in names}
    seed = [10**9]

    async def worker(name: str, jobs: list[int]) -> int:
        done = 0
        while jobs:
            one = await stream_once(pools[name], servers.paths[name], tokens, jobs.pop())
            done += len(one[1]) if one else 0
        return done

    stat0 = {n: cpu_s(servers.cpu_pids[n]) for n in names}
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            pid = servers.cpu_pids[name][0]
            jobs = list(range(seed[0], seed[0] + requests))
            seed[0] += requests
            main0, others0 = thread_ns(pid)
            done = sum(await asyncio.gather(*(worker(name, jobs) for _ in range(streams))))
            main1, others1 = thread_ns(pid)
            c, per = out[name], max(1, done) * 1000.0
            c.main.append((main1 - main0) / per)
            c.others.append((others1 - others0) / per)
            c.total.append(c.main[-1] + c.others[-1])
            c.tokens += done
    for n in names:
        out[n].stat_s = cpu_s(servers.cpu_pids[n]) - stat0[n]
    for p in pools.values():
        p.close()
    return out


def cpu_rows(cpu: dict[str, Cpu], trees: list[str]) -> list[str]:
    out = ["CPU per forwarded token (µs; median of rounds)   main thread   others   "
           "(/proc stat: whole phase)"]  # fmt: skip
    for tree in trees:
        for v in variants(tree):
            c = cpu[tree + v]
            out.append(
                f"  {tree + v:12s} {median(c.total):7.2f}            {median(c.main):7.2f}"
                f"     {median(c.others):6.2f}   ({c.stat_s / max(1, c.tokens) * 1e6:.2f})"
            )
    out.append("\nCPU per token, export on ÷ off (goal ≤ 1.05): median of the rounds' ratios "
               "[95 % interval]; ratio of medians; main thread only; /proc stat; ours-again: "
               "the same proxy as ours (the noise floor)")  # fmt: skip
    for tree in trees:
        off = cpu[tree]
        for v in compared(tree):
            on = cpu[tree + v]
            ratios = [a / b for a, b in zip(on.total, off.total)]
            ci = bootstrap_ci(ratios)
            main = median([a / b for a, b in zip(on.main, off.main)])
            stat = (on.stat_s / on.tokens) / (off.stat_s / off.tokens)
            out.append(
                f"  {tree + v:12s} {ci.estimate:.3f} [{ci.low:.3f}, {ci.high:.3f}]   "
                f"{median(on.total) / median(off.total):.3f}   main {main:.3f}   stat {stat:.3f}"
                f"   rounds: {' '.join(f'{r:.2f}' for r in ratios)}"
            )
    rounds = ", ".join(f"{x:.1f}" for x in cpu[trees[0]].total)
    out.append(f"  ({trees[0]}'s own rounds, µs a token: {rounds})")
    return out


# -- 3. export's own work --------------------------------------------------------------


class _Taken:
    success = True


def export_cpu_per_request(tokens: int, n: int = 256, tries: int = 5) -> tuple[float, float]:
    """µs of this thread's CPU per finished request of ``tokens`` output tokens (ITL
    varied): (the exporter's work — metric points, span, its encoding — the send left
    out; the SDK's ReadableSpan and encoding of the same spans, for comparison)."""
    import random

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tests.support.made_outcomes import metrics, outcome
    from tui.otel.export import OtelExporter
    from tui.otel.spans import span_of

    rng = random.Random(0)
    done = []
    for i in range(n):
        gaps = [rng.uniform(1.5, 2.5) for _ in range(tokens - 1)]
        done.append(outcome(i, metrics=metrics(itl_chunk_ms=gaps, itl_token_ms=gaps)))
    ex = OtelExporter(f"http://127.0.0.1:{_closed_port()}")
    ex._sender.post = lambda payload: _Taken()  # the network left out
    ours = sdk = float("inf")
    for _ in range(tries):
        t0 = time.thread_time()
        ex._export(done, {})
        ours = min(ours, (time.thread_time() - t0) / n * 1e6)
        spans = [span_of(o) for o in done]
        for s in spans:
            s.trace_id, s.span_id = "1" * 32, "2" * 16
        t0 = time.thread_time()
        encode_spans([ex._sender.readable(s) for s in spans]).SerializePartialToString()
        sdk = min(sdk, (time.thread_time() - t0) / n * 1e6)
    assert ex.stats.spans_exported == tries * n, ex.stats
    ex.close(0.5)
    return ours, sdk


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=120, help="latency rounds")
    ap.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    ap.add_argument(
        "--latency-tokens", type=int, default=32, help="output tokens per latency request"
    )
    ap.add_argument("--interval-ms", type=float, default=2.0)
    ap.add_argument("--cpu-streams", type=int, default=16)
    ap.add_argument("--cpu-requests", type=int, default=64, help="a path's requests a round")
    ap.add_argument("--cpu-rounds", type=int, default=16)
    ap.add_argument("--before", type=Path, help="an older checkout's tree, run beside ours")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.cpu_requests, a.cpu_rounds = 6, 32, 2
    flush_s = 5.0  # the proxies' export interval (the SDK's OTEL_BSP_SCHEDULE_DELAY)
    if a.smoke:  # one round of each part, short answers, an export every 0.5 s
        a.rounds, a.cpu_requests, a.cpu_rounds, a.cpu_streams = 2, 8, 1, 4
        a.tokens = a.latency_tokens = 16
        os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "500"  # the proxies inherit it
        flush_s = 0.5
    trees = ["ours"] + (["before"] if a.before else [])
    print(f"otel_overhead on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}; "
          f"load before: {os.getloadavg()[0]:.2f} (uptime's 1-minute average); "
          f"{a.tokens} output tokens a request, a token every {a.interval_ms:g} ms")  # fmt: skip
    if a.before:
        print(f"before: the tree at {a.before}")
    sinks = {tree: OtlpSink() for tree in trees}
    servers = start(a.interval_ms, max(64, a.cpu_streams), sinks, a.before)
    names = [t + v for t in trees for v in variants(t)]
    try:
        t0 = time.monotonic()
        lat = asyncio.run(latency_rounds(servers, a.latency_tokens, a.rounds))
        cpu = asyncio.run(
            measure_cpu(servers, names, a.cpu_streams, a.tokens, a.cpu_requests, a.cpu_rounds)
        )
        time.sleep(flush_s + 1.0)  # the last batches leave (an export every flush_s)
        counts = settled_counts(servers, [n for n in names if n.endswith(VARIANTS[1:])])
        took = time.monotonic() - t0
    finally:
        servers.stop()
        for s in sinks.values():
            s.stop()
    sent_each = (a.rounds + 1) + a.cpu_requests * a.cpu_rounds
    print(f"load after: {os.getloadavg()[0]:.2f}; measured in {took:.0f} s; "
          f"{a.rounds} latency rounds of {a.latency_tokens} tokens; CPU: {a.cpu_rounds} "
          f"rounds of {a.cpu_requests} requests a path, {a.cpu_streams} streams\n")  # fmt: skip
    print("\n".join(latency_rows(lat, trees)))
    print()
    print("\n".join(cpu_rows(cpu, trees)))
    ours, sdk = export_cpu_per_request(a.tokens, *((16, 1) if a.smoke else ()))
    base = median(cpu["ours"].total)
    print(f"\nexport's own CPU per request ({a.tokens} tokens; thread time, best of "
          f"{1 if a.smoke else 5}): "
          f"{ours:.1f} µs = {ours / a.tokens:.2f} µs a token, {ours / a.tokens / base:.1%} of "
          f"ours' {base:.1f}; the SDK's ReadableSpan + encoding of the same spans alone: "
          f"{sdk:.1f} µs")  # fmt: skip
    print("\nthe workload, checked")
    bad = False
    for tree in trees:
        live, dead = counts[tree + "+otlp"], counts[tree + "+dead"]
        got = len(sinks[tree].spans)
        print(f"  {tree}+otlp: {got} spans received of {sent_each} requests sent; proxy says "
              f"exported {live.get('infertop_otel_spans_exported_total', 0):.0f}, dropped "
              f"{live.get('infertop_otel_spans_dropped_total', 0):.0f}")  # fmt: skip
        print(f"  {tree}+dead: exported {dead.get('infertop_otel_spans_exported_total', 0):.0f}"
              f", dropped {dead.get('infertop_otel_spans_dropped_total', 0):.0f}, failed "
              f"batches {dead.get('infertop_otel_export_failures_total', 0):.0f}")  # fmt: skip
        bad |= got != sent_each or bool(dead.get("infertop_otel_spans_exported_total", 0))
        bad |= not dead.get("infertop_otel_spans_dropped_total", 0)
    if a.smoke:
        smoke.check(not bad, "every live request reached the receiver as a span, the dead "
                    "collector took none and counted its drops (see the counts above)")  # fmt: skip
        smoke.check(
            all(cpu[n].tokens == a.cpu_requests * a.cpu_rounds * a.tokens for n in names),
            "every path forwarded every token of the CPU phase",
        )
        smoke.passed(f"{len(names)} paths, {sent_each} requests each, spans counted")
        return
    if bad:
        raise SystemExit("the workload did not happen as meant (see the counts above)")


if __name__ == "__main__":
    main()
