"""The per-token parse chain, back to back and after the core has been idle.

Why infertop's paced figure (benchmarks/client_throughput.py) is about twice the bare
reader's although its parsing costs a few µs per token in a tight loop: at one token per
read, every read callback runs right after the process has waited in epoll for the next
token, and code and data that were not touched since (the chain's functions, the
connection's framing, decoder and state objects) are fetched again. This script measures
that on the real objects, one pace-server token (``data: {...}`` in one HTTP chunk) per
call: ``Chunked.feed`` → ``OpenAIChatDecoder.feed`` (its SSE framing, then the payload) →
``RequestTimeline.add``, as the read callback runs them.

- hot: calls back to back;
- after an idle of X µs: each call follows ``time.sleep(X)``.

CPU per call = the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) read around the call,
minus the same around an empty call after the same idle (the clock reads' own cost, which
grows when cold too); median over --rounds interleaved rounds of --calls calls. Figures
in µs per token, and the ratio to hot.

    .venv/bin/python -m benchmarks.parse_cold_vs_hot [--rounds 5] [--calls 4000]
        [--idle-us 0,60,250,1000]

Measured on the project's 2-core VM (idle, defaults, issue 12), median (min-max):
    idle µs   µs/token             × hot
          0    3.03 (2.92-4.83)    1.00
         60    6.37 (5.89-8.45)    2.10
        250    9.13 (8.66-12.24)   3.01
       1000   14.56 (10.90-29.04)  4.80
In a paced client_throughput.py run (16 streams, 1 ms per token each) our bench process
woke 0.53 times per token (perf stat: 34,928 epoll waits for 65,781 tokens), about every
120 µs: the chain there costs what it costs after such an idle, not the hot figure, and
so does the bare reader's own work. Inlining the framing and SSE one-token checks into
their callers (fewer calls, the same work) saved 0.2-0.6 µs per token at 60-250 µs idle
here, within the noise of a whole run, and was not kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from benchmarks import smoke
from tui.core.timeline import RequestTimeline
from tui.engines.dialects import decoder_for
from tui.transport.http_framing import Chunked


def token_read(i: int) -> bytes:
    """What tests/support/pace_server.py sends for token ``i``: one chunk, one event."""
    obj = {
        "id": "pace-1",
        "object": "text_completion",
        "model": "pace",
        "choices": [{"index": 0, "text": f"tok{i} ", "finish_reason": None}],
    }
    event = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


def chain() -> tuple[Callable[[bytes, int], None], RequestTimeline]:
    """One stream's parse chain, as the read callback runs it for each read, and the
    timeline it feeds."""
    body, timeline = Chunked(), RequestTimeline()
    decoder = decoder_for("openai-completions")
    add = timeline.add

    def on_read(data: bytes, t_ns: int) -> None:
        decoder.feed(body.feed(data), t_ns, add)

    return on_read, timeline


def cpu_per_call(calls: int, idle_s: float, work: bool) -> float:
    """Median thread CPU (ns) around one call (or an empty one) after ``idle_s``; with
    ``work``, checks that every call's token reached the timeline."""
    on_read, timeline = chain()
    reads = [token_read(i) for i in range(64)]
    clock = time.thread_time_ns
    out = []
    for i in range(calls):
        data = reads[i % 64]
        if idle_s:
            time.sleep(idle_s)
        c0 = clock()
        if work:
            on_read(data, i)
        out.append(clock() - c0)
    parsed = len(timeline.chunk_ns)
    if parsed != (calls if work else 0):
        raise SystemExit(f"the chain parsed {parsed} tokens of {calls} calls")
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=4000)
    ap.add_argument("--idle-us", default="0,60,250,1000")
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.rounds, a.calls = 1, 200
    idles = [float(x) for x in a.idle_us.split(",")]
    got: dict[float, list[float]] = {x: [] for x in idles}
    for r in range(a.rounds):
        for idle in idles if r % 2 == 0 else idles[::-1]:
            calls = a.calls if idle < 500 else max(500, a.calls // 4)
            with_work = cpu_per_call(calls, idle / 1e6, True)
            empty = cpu_per_call(calls, idle / 1e6, False)
            got[idle].append((with_work - empty) / 1000)
    hot = statistics.median(got[idles[0]]) if idles[0] == 0 else None
    print(f"parse chain, one token per call; median of {a.rounds} rounds (min-max)")
    print("  idle µs   µs/token            × hot")
    for idle in idles:
        v = got[idle]
        m = statistics.median(v)
        ratio = f"{m / hot:5.2f}" if hot else "  —"
        print(f"  {idle:7.0f}   {m:5.2f} ({min(v):.2f}-{max(v):.2f})   {ratio}")
    if a.smoke:  # every call parsed its token (cpu_per_call checks it)
        smoke.passed(f"{a.calls} tokens parsed per arm, {len(idles)} idle lengths")


if __name__ == "__main__":
    main()
