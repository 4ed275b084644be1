"""What the engine panel's reads cost the engine: llama-server's decode rate with the
panel reading it ÷ without, in one run, arms interleaved.

A llama-server (SmolLM2, -np 1, ``--threads`` threads, ``--metrics``) answers the same
prompt, greedy, ``--tokens`` tokens (``ignore_eos``), in three arms per round, the order
rotating each round:

off    nobody reads the server while it decodes;
on     the panel's reader (tui/engines/inside/reader.py: /metrics and /slots, /props
       once) in a thread at its own rate, once a second — what the chat and the proxy do;
10 Hz  the same reader ten times a second: ten times the panel's rate, to show the
       reads' cost is not hidden in the noise.

Then, a figure that holds at any load: the server's own CPU per read (its process's
utime + stime from /proc over ``--reads`` back-to-back reads of an idle server, less the
same span idle): what one read takes from the engine, and so what a read a second is
as a share of one core.

The figure is the engine's own decode rate (``timings.predicted_per_second``: llama.cpp's
clock), so it is the engine that slowed, not a client's stamps. Per round on ÷ off and
10 Hz ÷ off, then medians with a bootstrap 95 % interval. The workload is checked: each
answer has ``--tokens`` tokens, and the reader made reads while it decoded (counted).

    .venv/bin/python -m benchmarks.engine_inside_cost [--rounds 10] [--tokens 256]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks import smoke
from tui.engines.inside.reader import InsideReader

PROMPT = "Write a long story about a lighthouse keeper and a storm."
ARMS = ("off", "on", "10 Hz")
RATES = {"off": None, "on": 1.0, "10 Hz": 0.1}


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def med_ci(xs: list[float], resamples: int = 2000) -> str:
    rng = random.Random(1)
    boots = sorted(statistics.median(rng.choice(xs) for _ in xs) for _ in range(resamples))
    lo, hi = boots[int(0.025 * resamples)], boots[int(0.975 * resamples) - 1]
    return f"{statistics.median(xs):.3f} [{lo:.3f}, {hi:.3f}]"


def answer(url: str, tokens: int, every_s: float | None) -> tuple[float, int]:
    """One answer; (the engine's decode tok/s, reads made while it decoded)."""
    reader = InsideReader("llama-server", url, min_interval_s=every_s or 1.0)
    reader.read()  # /props once, before the request
    reads0 = reader.reads
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            reader.sample()
            done.wait(0.01)

    t = threading.Thread(target=watch, daemon=True) if every_s else None
    if t is not None:
        t.start()
    body = {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": tokens,
        "temperature": 0,
        "seed": 1,
        "ignore_eos": True,
        "cache_prompt": False,
    }
    try:
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=600).json()
    finally:
        done.set()
        if t is not None:
            t.join()
    timings = r["timings"]
    assert timings["predicted_n"] == tokens, timings  # the workload happened as meant
    return float(timings["predicted_per_second"]), reader.reads - reads0


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_read(url: str, pid: int, reads: int) -> tuple[float, float]:
    """(the server's CPU seconds per read, its CPU seconds per second idle)."""
    reader = InsideReader("llama-server", url, min_interval_s=0.0)
    reader.read()
    c0, t0 = process_cpu_s(pid), time.monotonic()
    for _ in range(reads):
        reader.read()
    c1, t1 = process_cpu_s(pid), time.monotonic()
    time.sleep(t1 - t0)  # the same span, idle
    idle = (process_cpu_s(pid) - c1) / (t1 - t0)
    reader.close()
    return ((c1 - c0) - idle * (t1 - t0)) / reads, idle


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reads", type=int, default=300, help="reads for the server's CPU per read")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:  # one round of short answers; answer() checks each has its tokens
        a.rounds, a.tokens, a.reads = 1, 48, 20
    from tests.support.real_servers import start_llama_server
    from tui.engines.files.default_model import default_model_path

    tmp = Path(tempfile.mkdtemp(prefix="infertop-inside-cost-"))
    server = start_llama_server(default_model_path(), tmp, threads=a.threads)
    print(f"{os.cpu_count()} cores, llama-server -t {a.threads}, {a.tokens} tokens, {load()}")
    got: dict[str, list[float]] = {k: [] for k in ARMS}
    reads: dict[str, list[int]] = {k: [] for k in ARMS}
    try:
        answer(server.url, a.tokens, None)  # unmeasured: warm the server
        per, idle = cpu_per_read(server.url, server.pid, a.reads)
        print(
            f"the server's CPU per read (/metrics + /slots, {a.reads} reads of an idle server): "
            f"{per * 1000:.2f} ms (idle {idle * 1000:.1f} ms/s): at one read a second "
            f"{100 * per:.2f} % of one core   {load()}"
        )
        for r in range(a.rounds):
            order = ARMS[r % 3 :] + ARMS[: r % 3]
            for arm in order:
                time.sleep(1.0)
                tps, n = answer(server.url, a.tokens, RATES[arm])
                got[arm].append(tps)
                reads[arm].append(n)
            print(
                f"round {r + 1}: "
                + "  ".join(f"{k} {got[k][-1]:.1f} tok/s ({reads[k][-1]} reads)" for k in ARMS)
                + f"   {load()}"
            )
    finally:
        server.stop()
    on = [x / y for x, y in zip(got["on"], got["off"], strict=True)]
    fast = [x / y for x, y in zip(got["10 Hz"], got["off"], strict=True)]
    print(
        f"engine decode (llama.cpp's clock), medians: off {statistics.median(got['off']):.1f}, "
        f"on {statistics.median(got['on']):.1f}, 10 Hz {statistics.median(got['10 Hz']):.1f} tok/s"
    )
    print(
        f"on ÷ off (the panel, 1 read/s): median {med_ci(on)}  rounds "
        + " ".join(f"{x:.3f}" for x in on)
    )
    print(f"10 Hz ÷ off: median {med_ci(fast)}  rounds " + " ".join(f"{x:.3f}" for x in fast))
    print(
        f"reads per answer, median: on {statistics.median(reads['on'])}, "
        f"10 Hz {statistics.median(reads['10 Hz'])}   {load()} at the end"
    )
    if a.smoke:  # the fast reader read while the engine decoded, the quiet arm did not
        smoke.check(reads["10 Hz"][0] > 0 and reads["off"][0] == 0, f"reads: {reads}")
        smoke.passed(f"three arms of {a.tokens} tokens each, {reads['10 Hz'][0]} reads at 10 Hz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
