"""Does a slow consumer move the HTTP engine's stamps? Measured against the pace server.

The pace server (its own process) sends one token every --interval-ms. The OpenAI engine
streams from it while the consumer, after each event, does nothing / blocks in sleep
(releases the GIL, like I/O) / spins the CPU (holds the GIL, like heavy Python work).
Prints ITL p50 / p90 / max and mean ÷ the server's interval. Goal: mean ratio 1.00 in every
mode and p50 within 5 % with "none" and "sleep". A spinning consumer adds jitter up to the
interpreter's switch interval (sys.getswitchinterval(), 5 ms by default): the reader
thread waits for the GIL; the mean is unaffected because later stamps are not delayed
further. --switch-interval-ms shows the effect of a smaller switch interval.

    .venv/bin/python -m benchmarks.http_consumer_skew [--tokens 100] [--interval-ms 10]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time

from benchmarks import smoke
from tests.support.fake_server import support_command, support_env
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.http.openai_compat import OpenAICompatEngine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spin(seconds: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass


async def one(url: str, tokens: int, mode: str, hold_s: float) -> list[float]:
    e = OpenAICompatEngine(EngineSpec(name="pace", kind="openai", url=url))
    tl = RequestTimeline()
    async for ev in e.stream(GenerationRequest.from_prompt("x", max_tokens=tokens)):
        tl.add(ev)
        if mode == "sleep":
            time.sleep(hold_s)
        elif mode == "spin":
            spin(hold_s)
    await e.close()
    return compute_metrics(tl).itl_chunk_ms


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--interval-ms", type=float, default=10.0)
    ap.add_argument("--hold-ms", type=float, default=30.0, help="consumer time per event")
    ap.add_argument("--switch-interval-ms", type=float, default=None)
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.tokens, a.hold_ms = 12, 5.0
    if a.switch_interval_ms:
        sys.setswitchinterval(a.switch_interval_ms / 1000)
    port = free_port()
    server = subprocess.Popen(
        support_command("pace_server", "--port", str(port), "--interval-ms", str(a.interval_ms)),
        stdout=subprocess.PIPE,
        env=support_env(),
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # "pace server on ..."
        url = f"http://127.0.0.1:{port}"
        print(
            f"interval {a.interval_ms} ms, {a.tokens} tokens, consumer holds {a.hold_ms} ms "
            f"per event, switch interval {sys.getswitchinterval() * 1000:g} ms"
        )
        print(f"{'consumer':<8} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8} {'mean/interval':>14}")
        for mode in ("none", "sleep", "spin"):
            d = asyncio.run(one(url, a.tokens, mode, a.hold_ms / 1000))
            if a.smoke:  # every token came, one chunk each
                smoke.check(len(d) == a.tokens - 1, f"{mode}: {len(d) + 1} of {a.tokens} tokens")
            q = statistics.quantiles(d, n=10)
            print(
                f"{mode:<8} {statistics.median(d):8.2f} {q[8]:8.2f} {max(d):8.2f} "
                f"{statistics.mean(d) / a.interval_ms:14.3f}"
            )
    finally:
        server.terminate()
        server.wait(5)
    if a.smoke:
        smoke.passed(f"{a.tokens} tokens read by each of three consumers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
