"""infertop bench with 1 and 2 client worker processes (--workers), beside vLLM's client.

One pace server (tests/support/pace_server.py, its own process, paced at --interval-ms
per token per stream so every stream is active at once) serves, in turn and interleaved
over --rounds rounds: ``infertop bench --workers 1``, ``--workers 2``, and vLLM's ``bench
serve`` (when its venv is there), each with the same workload (/v1/completions, 64-token
prompts, 256 output tokens, --concurrency streams, --requests requests). Per client, over
the 10-90 % window of the server's tokens (benchmarks/client_common.py):

- tokens/s = Δ tokens sent / Δ wall time (what the client kept up with);
- client cores = Δ client CPU (whole process tree) / Δ wall time;
- tokens/s per client core = Δ tokens / Δ client CPU;
- scaling = tokens/s with 2 workers / tokens/s with 1 (goal >= 1.8 where the client,
  not the server or the machine, is the limit).

ITL error vs the server's send gaps: for every request of ours, each gap between two
successive tokens as infertop measured it (report.json) minus the gap between the
server's send times of the same two tokens (its /stamps, matched by the request's seed);
printed as median and p99 of |error| and the mean error, in µs, with and without workers.

    .venv/bin/python benchmarks/client_workers.py [--requests 512] [--concurrency 32]
        [--interval-ms 1] [--rounds 2] [--skip-vllm]

Measured on the shared 2-core machine (load average 5.7-8.1), defaults, median of 2
rounds: tokens/s, client cores, tokens/s per client core:
    --workers 1   23,700  0.26  94,688
    --workers 2   24,694  0.39  65,687      scaling 1.04 (goal >= 1.8: not reachable here)
    vLLM          25,064  0.31  80,366
The one-process pace server is the limit on 2 cores (17-26 of 32 streams active; a client
uses a third of a core), so a second client process adds its start-up and record
hand-off, not throughput. ITL error vs the server's send gaps (261,120 gaps each):
median |error| 9.0 µs / 8.6 µs (1 / 2 workers), mean +9.4 / +7.4 µs, p99 ~5 ms in both:
the loaded server's own stamps (taken after its write, competing for the same cores).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_common import (  # noqa: E402
    get_json,
    infertop_cmd,
    load_average,
    run_client,
    start_pace_server,
    vllm_cmd,
)

PROMPT_TOKENS, OUTPUT_TOKENS = 64, 256


def itl_errors_us(out: Path, url: str, first_rid: int, last_rid: int) -> list[float]:
    """Client gap − server send gap, µs, for every pair of successive tokens of the run."""
    report = json.loads((out / "report.json").read_text())
    seed0 = report["plan"]["seed"]
    stamps = get_json(url + "/stamps")
    rid_by_seed = {
        seed: rid
        for rid, seed in stamps["seed"].items()
        if first_rid < int(rid.split("-")[1]) <= last_rid
    }
    errors: list[float] = []
    for r in report["engines"][0]["records"]:
        if r["phase"] != "warm" or r["status"] != "ok":
            continue
        rid = rid_by_seed.get(seed0 + r["index"])
        if rid is None:
            continue
        sent = stamps["sent_ns"][rid]
        got = [c[0] for c in r["timeline"]["chunks"] if c[1]]
        if len(got) != len(sent):
            raise SystemExit(f"{rid}: {len(got)} tokens measured, {len(sent)} sent")
        for k in range(1, len(sent)):
            errors.append(((got[k] - got[k - 1]) - (sent[k] - sent[k - 1])) / 1e3)
    if not errors:
        raise SystemExit("no request of the run was matched to the server's send times")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=512)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--interval-ms", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-vllm", action="store_true")
    a = ap.parse_args()
    print(f"before: {load_average()}", flush=True)
    server, url = start_pace_server(a.interval_ms, stamps_kept=a.requests + 64)
    results: dict[str, list[dict]] = {}
    errors: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="infertop-workers-") as d:
            tmp = Path(d)
            for k in range(a.rounds):
                clients: list[tuple[str, tuple[list[str], dict[str, str]], Path | None]] = []
                for w in (1, 2):
                    out = tmp / f"w{w}-{k}"
                    cmd = infertop_cmd(
                        url, a.requests, a.concurrency, PROMPT_TOKENS, OUTPUT_TOKENS, out, w
                    )
                    clients.append((f"infertop --workers {w}", cmd, out))
                v = (
                    None
                    if a.skip_vllm
                    else vllm_cmd(url, a.requests, a.concurrency, PROMPT_TOKENS, OUTPUT_TOKENS, tmp)
                )
                if v is not None:
                    clients.append(("vllm bench serve", v, None))
                if k % 2:
                    clients.reverse()
                for name, (cmd, env), out in clients:
                    first = get_json(url + "/stats")["requests"]
                    r = run_client(name, cmd, url, env, a.requests)
                    last = get_json(url + "/stats")["requests"]
                    results.setdefault(name, []).append(r)
                    if out is not None:
                        errors.setdefault(name, []).extend(itl_errors_us(out, url, first, last))
                    print(
                        f"  round {k + 1} {name:20s} {r['window_tok_per_s']:9,.0f} tok/s, "
                        f"{r['window_cores']:.2f} client cores, {r['us_per_token']:.1f} µs "
                        f"CPU/token, streams active {r['active_median']:g}",
                        flush=True,
                    )
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"workload: {a.requests} requests x {OUTPUT_TOKENS} tokens, concurrency "
        f"{a.concurrency}, server {a.interval_ms:g} ms per token per stream; "
        f"{a.rounds} rounds, median over rounds"
    )
    print(f"  {'client':22s} {'tokens/s':>10s} {'client cores':>13s} {'tok/s per core':>15s}")
    med: dict[str, float] = {}
    for name, rs in results.items():
        med[name] = statistics.median(r["window_tok_per_s"] for r in rs)
        cores = statistics.median(r["window_cores"] for r in rs)
        per_core = statistics.median(r["tok_per_cpu_s"] for r in rs)
        print(f"  {name:22s} {med[name]:10,.0f} {cores:13.2f} {per_core:15,.0f}")
    one, two = med.get("infertop --workers 1"), med.get("infertop --workers 2")
    if one and two:
        print(f"  scaling, tokens/s with 2 workers / with 1: {two / one:.2f} (goal >= 1.8)")
    low = [
        (n, r["active_median"]) for n, rs in results.items() for r in rs
        if r["active_median"] < a.concurrency
    ]  # fmt: skip
    if low:
        print(f"  note: fewer streams active than {a.concurrency}: {low}")
    print("ITL error vs the server's send gaps (client gap − server gap), µs:")
    for name, errs in errors.items():
        absolute = sorted(abs(e) for e in errs)
        p99 = absolute[min(len(absolute) - 1, int(0.99 * len(absolute)))]
        print(
            f"  {name:22s} median |error| {statistics.median(absolute):7.1f}  p99 |error| "
            f"{p99:8.1f}  mean {statistics.fmean(errs):+7.2f}  ({len(errs):,} gaps)"
        )
    print(f"after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
