"""What OTLP export costs per finished request on its own thread, in µs, in one process:
the exporter's whole per-batch work (``OtelExporter._export``: each request's metric
points recorded into the histograms, its span built and encoded, the batch's OTLP
request put together) with the HTTP POST left out (the SDK client's ``export`` is
replaced by one that takes the bytes and answers success), for proxied requests of
``--tokens`` tokens each (one chunk a token, as benchmarks/otel_instructions.py's pace
server sends them).

Two cases: ``live`` (points and spans: a collector that takes them) and ``dead`` (the
spans rest after a failure: points only). ``--before DIR`` times an older checkout's
tree the same way, in child processes interleaved with ours round by round (each child
imports its own tree's ``tui``), and prints before ÷ ours per round and their median.

    .venv/bin/python -m benchmarks.otel_export_work                          # ours
    .venv/bin/python -m benchmarks.otel_export_work --before /tmp/old --tokens 32
    .venv/bin/python -m benchmarks.otel_export_work --smoke
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks import smoke

ROOT = Path(__file__).resolve().parents[1]

# Runs in a child with its tree as the working directory (``python -c``: the tree's own
# ``tui`` and tests/support), so that an older checkout is timed with its own code.
CHILD = r"""
import json, random, sys, time
from tests.support.made_outcomes import metrics, outcome
from tui.core.outcome import ClientIdentity
from tui.otel.export import OtelExporter

tokens, requests, batch = (int(a) for a in sys.argv[1:4])
rng = random.Random(7)
client = ClientIdentity(program="otel-export-work", process="python[4242]", address="127.0.0.1")

def one(n):
    gaps = [rng.uniform(9.0, 11.0) for _ in range(tokens - 1)]
    m = metrics(prompt_tokens=12, output_tokens=tokens, itl_chunk_ms=gaps,
                itl_token_ms=list(gaps), itl_token_weights=[1] * len(gaps),
                content_chunks=tokens, ttft_ms=20.0 + rng.random(), ttfo_ms=20.0,
                e2e_ms=20.0 + sum(gaps), tpot_ms=10.0, decode_tps=100.0, prefill_tps=600.0)
    return outcome(n, metrics=m, truth=None, client=client, kind=None,
                   upstream="http://127.0.0.1:38211")

class Taken:
    success = True

out = {}
for case in ("live", "dead"):
    ex = OtelExporter("http://127.0.0.1:9", flush_s=3600.0, metric_interval_s=3600.0)
    ex._sender.post = lambda payload: Taken()
    if case == "dead":
        ex._spans_rest.failed(time.monotonic())
        ex._spans_rest.failed(time.monotonic())
    outcomes = [one(n) for n in range(batch)]
    for _ in range(3):  # warm: first-use caches
        ex._export(outcomes, {})
    rounds = max(1, requests // batch)
    t0 = time.thread_time_ns()
    for _ in range(rounds):
        ex._export(outcomes, {})
    spent = time.thread_time_ns() - t0
    done = ex.stats.spans_exported if case == "live" else ex.stats.spans_dropped
    expect = (rounds + 3) * batch
    if done != expect or not len(ex._table):
        raise SystemExit(f"{case}: {done} of {expect} requests exported/dropped")
    out[case] = spent / 1000 / (rounds * batch)
    ex.close(0.1)
print(json.dumps(out))
"""


def child(tree: Path, tokens: int, requests: int, batch: int) -> dict[str, float]:
    """µs per request (thread CPU time) of each case, in a child importing ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    got = subprocess.run(
        [sys.executable, "-c", CHILD, str(tokens), str(requests), str(batch)],
        cwd=tree, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if got.returncode != 0:
        raise SystemExit(f"{tree}: the timing child failed:\n{got.stderr[-2000:]}")
    result: dict[str, float] = json.loads(got.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=32, help="tokens (chunks) a request")
    ap.add_argument("--requests", type=int, default=4000, help="requests timed a round")
    ap.add_argument("--batch", type=int, default=16, help="requests a batch (a POST)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", type=Path, help="an older checkout's tree, interleaved")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.requests, a.rounds, a.tokens = 64, 1, 16
    trees = [("ours", ROOT)] + ([("before", a.before.resolve())] if a.before else [])
    print(f"otel_export_work: µs of the export thread's CPU per request, {a.tokens} tokens "
          f"a request, batches of {a.batch}, {a.requests} requests a round, POST left out; "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    got: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    for r in range(a.rounds):
        for name, tree in trees if r % 2 == 0 else trees[::-1]:
            got[name].append(child(tree, a.tokens, a.requests, a.batch))
        print("  round", r + 1, "  ".join(
            f"{name}: live {g[-1]['live']:6.1f} dead {g[-1]['dead']:6.1f}"
            for name, g in got.items()))  # fmt: skip
    for name, rounds in got.items():
        live = statistics.median(g["live"] for g in rounds)
        dead = statistics.median(g["dead"] for g in rounds)
        print(f"{name:7s} median µs a request: live {live:6.1f}   dead (points only) {dead:6.1f}")
    if a.before:
        for case in ("live", "dead"):
            ratios = [b[case] / o[case] for b, o in zip(got["before"], got["ours"])]
            print(f"before ÷ ours, {case}: median {statistics.median(ratios):.2f} "
                  f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})")  # fmt: skip
    print(f"load after: {os.getloadavg()[0]:.1f}")
    if a.smoke:
        smoke.check(all(v > 0 for g in got["ours"] for v in g.values()), "a case timed nothing")
        smoke.passed("every request's points recorded and span exported (live), dropped (dead)")


if __name__ == "__main__":
    main()
