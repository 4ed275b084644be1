"""Client CPU per output token: infertop bench beside the peer clients, in two regimes.

Every client drives the same synthetic OpenAI server (tests/support/pace_server.py, its
own process) with the same workload: /v1/completions, streaming, 64-token prompts, 256
output tokens (fixed), concurrency 16, --requests (512) requests; --rounds (3) rounds, the
clients interleaved within each round. Two regimes:

- paced: the server sends one token per stream every 1 ms, so all 16 streams are active
  at once and a read carries about one token (the regime of a real fast server);
- unpaced: no delay; the server then never yields while it streams, so it serves one
  request at a time and a read carries up to ~256 tokens.

The script checks the server really had the intended streams active (the median of its
/stats "active" over the measured window: 16 in the paced regime; unpaced, the server
answers /stats only between streams, so it is not shown) and prints, per client:
µs of client CPU per token in the 10-90 % window and over the whole run (start-up and
report included), and the CPU spent per request after the last token (see
benchmarks/client_common.py for the exact definitions). CPU is of the client's whole
process tree. Goals (issue 12, item 6): paced, less CPU per token than every peer
(<= 20 µs); whole-run cost within 1.2x of the in-window cost. Beside the peers runs the
bare reader (benchmarks/bare_reader.py), the floor any Python client stands on here: the
difference to it is what parsing and records cost.

    .venv/bin/python -m benchmarks.client_throughput [--requests 512] [--rounds 3]
        [--regimes paced,unpaced] [--skip-peers]

Measured (issue 12), 512 requests, 3 interleaved rounds, µs of client CPU per token in
the window, median (min-max), then whole run.
    First pass, on the shared 2-core machine with four other engineers' work running
    (load average 8.5-10): paced 13.0 (12.6-14.1), whole 19.0; vLLM 13.1, servebench
    13.9. Under that load a read carried several tokens, so every client looked cheap;
    on the same machine idle (load 0.9) that code measured 35.8 (vLLM 36.6, servebench
    34.3), whole 42.7.
    Second pass (events handed from the reading task straight to the record, no queue
    and no second task per read; the bench on uvloop; tui/ byte-compiled first, as pip
    does), idle machine (load 0.5 before), every peer installed and run:
        paced    infertop 26.1 (24.9-26.6), whole 32.7   vLLM 37.2 (37.2-38.4), whole 133.0
                 servebench 36.3 (35.4-38.8), whole 43.5; llama-benchy 36.3 (35.9-36.5),
                 whole 45.3; AIPerf 124.8 (123.9-128.0), whole 204.2; 16 streams active
                 in every run of ours (AIPerf: 15 in two runs)
                 ms of CPU per request after the last token: ours 1.0, vLLM 0.8, sb 0.5
        unpaced  infertop 15.8 (11.1-16.7), whole 22.1   vLLM 15.1, servebench 15.4,
                 llama-benchy 19.5, AIPerf 70.3
    Paced (the regime of a real fast server), ours is 0.70x of vLLM's client and 0.72x
    of servebench's and llama-benchy's, 0.21x of AIPerf's; unpaced, level with vLLM's and
    servebench (1.05, 1.02: there ours reads in 1 KiB pieces when bytes have waited, to
    keep each event's own kernel stamp). Not met: <= 20 µs (26.1), and whole run <= 1.2x
    the window (1.25: start-up ~0.3 s of CPU to the first token, imports most of it;
    ~0.55 s after the last token, building and writing the report: to_dict of 131k chunk
    stamps, bootstrap intervals, JSON).

    Third pass (each read parsed in the socket's read callback: no task woken per read;
    a read that is exactly one chunk holding one SSE event is two slices; the report
    built with the collector paused; the small calls through the lean client), with the
    bare reader (benchmarks/bare_reader.py: uvloop + recvmsg, no parsing) as the floor;
    idle machine (load 0.25 before):
        paced    infertop 21.8 (18.6-22.4), whole 25.9 (1.19x)   floor 10.6 (9.1-11.6)
                 vLLM 35.2, servebench 33.9, llama-benchy 32.4, AIPerf 118.8
                 ours 0.62 / 0.64 / 0.67 / 0.18 of theirs, about 2x the floor each round
        unpaced  infertop 12.2 (11.7-14.4), whole 15.4 (1.26x)   floor 8.9
                 vLLM 13.5, servebench 15.2, llama-benchy 18.1, AIPerf 55.9
    Met: whole run <= 1.2x the window (paced), below every peer in both regimes. Not met:
    <= 20 µs (18.6 in the fastest round; the machine's speed drifts +-15 % in minutes:
    the floor itself went 9.1 -> 11.6 in the same rounds).
    Fourth pass (the per-read path lighter: the kernel stamp read inline, no
    data_received hop, the one-chunk check by bytes.strip, the one-event check first and
    without "in", on_data with fewer lookups), idle machine (load 0.4 before):
        paced    infertop 20.0 (19.5-20.6), whole 23.4 (1.17x)   floor 10.2 (10.0-11.1)
                 vLLM 36.9, servebench 33.9, llama-benchy 33.5, AIPerf 119.2
                 ours 0.54 / 0.59 / 0.60 / 0.17 of theirs, 1.96x the floor
        unpaced  infertop 11.6 (10.0-12.4), whole 14.5 (1.26x)   floor 8.4
                 vLLM 13.7, servebench 14.5, llama-benchy 16.5, AIPerf 57.8
    An interleaved A/B the same hour (4 rounds, each tree its own working directory):
    before 23.3 (22.2-23.8), after 21.4 (20.8-23.4), floor 11.5. Why about twice the
    floor although the chain costs ~3 µs per token back to back: each read follows an
    idle wait (0.53 wakes per token), and the chain costs 2-5x as much after one
    (benchmarks/parse_cold_vs_hot.py).
    Correction: earlier A/B runs of two source trees (here and in the second pass's
    "tried and reverted") ran the checkout's code for both, as python -m puts the working
    directory first on sys.path; a variant must run with its own tree as the working
    directory. Parsing in the read callback, reverted then as -3 %, measures -18 %.

History of the unpaced-only version of this benchmark (before issue 12):

Both clients drive the same fast synthetic OpenAI server (tests/support/pace_server.py
with no delays, in its own process) with the same workload: /v1/completions, streaming,
64-token prompts, 256 output tokens (fixed), concurrency 16, ~1000 requests. While each
client runs, the script samples the client's CPU time (utime + stime of its process,
all threads, from /proc/PID/stat) and the server's count of tokens sent (GET /stats).
The figure is taken between the samples where the server had sent 10 % and 90 % of the
run's tokens (imports, start-up and report writing fall outside):

    tokens parsed per second per client core = Δ tokens / Δ client CPU seconds

Our ratio = ours / theirs. Goal: >= 1. vLLM's client is launched from the vLLM venv with
the RECIPES.md launcher trick (version lookup answered "0.32.0+cpu", VLLM_TARGET_DEVICE=cpu).

Measured on the shared 2-core dev machine (noisy; µs of client CPU per token is the robust
figure), 1000 requests unless noted:

    before (httpx + wait_for per read, one hand-off per event):
        ours    8,022-9,192 tok/s/core (109-125 µs/token)   vLLM 82,342-87,102 (11.5-12.1 µs)
        ratio 0.10-0.11
    after (tui/transport/http1.py for plain http, batched hand-off, bytes SSE, orjson):
        ours   95,817 (10.4 µs)  vLLM 84,890 (11.8 µs)  ratio 1.13   (20 s wall)
        ours  100,728  (9.9 µs)  vLLM 74,816 (13.4 µs)  ratio 1.35   (28 s wall)
        ours   83,947 (11.9 µs)  (load average 7; periodic checkpoint switched off)
    after, but runs longer than ~30 s (a loaded machine): the bench's 30-s checkpoint
    (the whole report rebuilt from every record: ~2.5 s CPU per 640 records) falls inside
    the measured window; vLLM's client writes its results only at the end:
        ours   66,426-70,422 (14.2-15.1 µs)  vLLM 68,956-80,556 (12.4-14.5 µs)  ratio 0.82-0.96
    after checkpoints were bounded to 5 % of wall time (tui/bench/runner.py) and report.json
    written with orjson, on a quiet machine (load average 1.4):
        ours   83,413 (12.0 µs)  vLLM 73,766 (13.6 µs)  ratio 1.13   (14.5 s wall)

Per-token path reworked (branch perf): keep-alive connections are reused after [DONE]
(every request used to open a new one), SSE events cut from a read with one regex,
payloads to orjson as bytes, one unfrozen TextChunk per token, batches to the bench
driver, timeline chunks as untracked columns and start-up objects frozen (GC), the cancel
token calls back instead of a 20-ms poll, no EAGAIN read after a short read. µs of client
CPU per token, ours / vLLM (ratio), load average 0.6-2.9: another engineer's CPU benchmark
kept one of the two cores busy throughout, and that load drifted; even unchanged code
moved ±25 % between runs minutes apart, so single runs prove little:
    main, same session:    15.1 / 8.9 (0.59)   11.1 / 12.8 (1.15)   11.4 / 9.8 (0.86)
    final per-token path, every run with vLLM in time order: the first five and the two
    marked * at the SSE-regex commit, the two marked + with the short-read change added,
    the last four at the final commit (which adds only the ITL-estimate tweak):
        9.4 / 14.1 (1.50)    8.8 / 12.9 (1.46)    7.9 / 12.7 (1.61)    9.6 / 10.5 (1.10)
        9.3 / 13.7 (1.48)   14.1 / 14.0 (0.99)+  11.9 / 13.3 (1.11)+  12.9 / 11.6 (0.90)*
       12.3 / 10.9 (0.88)*   8.7 / 10.2 (1.18)    9.5 / 10.9 (1.15)    8.7 / 13.5 (1.54)
        9.4 / 11.6 (1.22)
    Ours: 7.9-14.1 µs (median 9.4) vs main's 11.1-15.5 in the same session; vLLM's:
    10.2-14.1 (median 12.7), 8.9 in the session's quietest run. The goal (ours >= 1) held
    in 10 of 13 runs, not reliably; ours 25 % below vLLM's (ratio >= 1.33) in 5 of 13.
    Not kept: the body parsed in the read callback (no task wake-up per read) and handing
    events to the consumer at most every 5 ms. Both cut the work per read or per hand-off,
    but the reader then woke more often for less data each time, and CPU per token did
    not measurably drop (ratios 0.64-1.31 over six runs with the first).

Merged into main, on a quiet machine (load average 0.4-1.3, nothing else running), every
run in time order, µs per token ours / vLLM (ratio); the last seven also with bootstrap
resampling by Random.choices and record dictionaries built once (checkpoints: both only
matter in runs long enough to checkpoint inside the window):
    12.6 / 14.0 (1.11)   12.6 / 13.4 (1.07)   12.2 / 14.0 (1.16)   11.7 / 13.1 (1.11)
    13.0 / 14.0 (1.08)   14.2 / 13.7 (0.97)   12.8 / 13.4 (1.05)   13.9 / 13.5 (0.97)
    12.4 / 15.3 (1.23)   10.7 / 13.5 (1.26)
    Median ratio 1.10 (ours 12.6 µs, vLLM's 13.6); >= 1 in 8 of 10 runs. Ours also
    finishes the 1000 requests in about half the wall time (8-12 s vs 14-27 s): it drives
    the server faster, so each read carries fewer tokens, which costs more per token; a
    slower client batches for free.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks import smoke
from benchmarks.client_common import (
    BARE,
    compile_package,
    infertop_cmd,
    load_average,
    peer_cmds,
    run_client,
    start_pace_server,
)

CONCURRENCY, PROMPT_TOKENS, OUTPUT_TOKENS = 16, 64, 256
REGIMES = {"paced": 1.0, "unpaced": 0.0}  # ms between a stream's tokens
OURS = "infertop bench"


def run_regime(regime: str, a: argparse.Namespace, tmp: Path) -> dict[str, list[dict]]:
    server, url = start_pace_server(REGIMES[regime])
    results: dict[str, list[dict]] = {}
    try:
        clients = (
            {}
            if a.skip_peers
            else peer_cmds(url, a.requests, CONCURRENCY, PROMPT_TOKENS, OUTPUT_TOKENS, tmp)
        )
        if a.smoke:  # the floor and the one peer the test command installs (vLLM's)
            clients = {n: c for n, c in clients.items() if n in (BARE, "vllm bench serve")}
        for name, why in clients.items():
            if isinstance(why, str):
                print(f"  {name}: skipped, {why}")
                if a.smoke:
                    smoke.left_out(name, why)
        for k in range(a.rounds):
            out = tmp / f"ours-{regime}-{k}"
            cmd, env = infertop_cmd(
                url, a.requests, CONCURRENCY, PROMPT_TOKENS, OUTPUT_TOKENS, out, a.workers
            )
            order = [(OURS, (cmd, env))] + [
                (n, c) for n, c in clients.items() if not isinstance(c, str)
            ]
            if k % 2:
                order.reverse()  # interleaved: neither client always runs first
            for name, (cmd, env) in order:
                r = run_client(name, cmd, url, env, a.requests)
                results.setdefault(name, []).append(r)
                print(
                    f"  round {k + 1} {name:18s} {r['us_per_token']:6.1f} µs/token in window, "
                    f"{r['whole_us_per_token']:6.1f} whole run; streams active "
                    f"{r['active_median']:g}; {r['wall_s']:.1f} s wall",
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait(10)
    return results


def active_text(regime: str, rs: list[dict]) -> str:
    """Streams active at the server; unpaced it answers /stats only between streams."""
    if regime == "unpaced":
        return "n/a"
    return f"{statistics.median(r['active_median'] for r in rs):g}"


def fmt_range(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--regimes", default="paced,unpaced", help="paced, unpaced or both")
    ap.add_argument("--workers", type=int, default=1, help="infertop bench --workers")
    ap.add_argument("--skip-peers", action="store_true", help="run infertop bench only")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:  # one paced round of two requests per stream: ~1 s of streaming per client
        a.requests, a.rounds, a.regimes = 2 * CONCURRENCY, 1, "paced"
    regimes = [r.strip() for r in a.regimes.split(",") if r.strip()]
    bad = [r for r in regimes if r not in REGIMES]
    if bad or not regimes:
        ap.error(f"--regimes: unknown {', '.join(bad) or '(none)'}; expected paced, unpaced")
    compile_package()
    print(f"before: {load_average()}")
    failed = False
    with tempfile.TemporaryDirectory(prefix="infertop-client-") as d:
        for regime in regimes:
            print(f"{regime} ({REGIMES[regime]:g} ms per token per stream):", flush=True)
            results = run_regime(regime, a, Path(d))
            print(
                f"{regime}: {a.requests} requests x {OUTPUT_TOKENS} tokens, concurrency "
                f"{CONCURRENCY}, {a.rounds} rounds; median (min-max) over rounds"
            )
            print(
                f"  {'client':18s} {'µs/token window':>18s} {'whole run':>18s} "
                f"{'ms/request after':>17s} {'streams':>8s}"
            )
            for name, rs in results.items():
                if a.smoke:
                    want = a.requests * OUTPUT_TOKENS
                    got = [r["tokens"] for r in rs]
                    # (ours sends one one-token request of its own before the level)
                    smoke.check(all(n >= want for n in got), f"{name}: {got} tokens of {want}")
                tails = [
                    r["tail_ms_per_request"] for r in rs if r["tail_ms_per_request"] is not None
                ]
                print(
                    f"  {name:18s} {fmt_range([r['us_per_token'] for r in rs]):>18s} "
                    f"{fmt_range([r['whole_us_per_token'] for r in rs]):>18s} "
                    f"{fmt_range(tails) if tails else '—':>17s} "
                    f"{active_text(regime, rs):>8s}"
                )
            ours = results.get(OURS, [])
            if regime == "paced":
                low = [r["active_median"] for r in ours if r["active_median"] < CONCURRENCY]
                if low:
                    failed = True
                    print(f"  CHECK FAILED: only {low} streams active, expected {CONCURRENCY}")
                else:
                    print(f"  check: the server had {CONCURRENCY} streams active in our every run")
                peers_low = sorted(
                    {n for n, rs in results.items() for r in rs if r["active_median"] < CONCURRENCY}
                    - {OURS}
                )
                if peers_low:
                    print(f"  note: fewer streams active in some run of: {', '.join(peers_low)}")
            if ours:
                win = statistics.median(r["us_per_token"] for r in ours)
                whole = statistics.median(r["whole_us_per_token"] for r in ours)
                print(f"  ours: whole run / window = {whole / win:.2f} (goal <= 1.20)")
                for name, rs in results.items():
                    if name != OURS:
                        peer = statistics.median(r["us_per_token"] for r in rs)
                        if name == BARE:
                            print(f"  ours − {name} = {win - peer:.1f} µs/token (parsing, records)")
                        else:
                            print(f"  ours / {name} (µs/token in window) = {win / peer:.2f}")
    print(f"after: {load_average()}")
    if a.smoke and not failed:  # every client read every token (run_client checks the
        # server's count); ours with every stream active at once (checked above)
        smoke.passed(f"{a.requests} requests x {OUTPUT_TOKENS} tokens, ours and the peers here")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
