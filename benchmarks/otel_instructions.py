"""Where OTLP export's cost goes in `infertop proxy`, counted in instructions, not time:
each proxy runs under valgrind's callgrind (``--separate-threads``), and the instructions
per forwarded token are counted per thread — the main thread (the request path) apart
from the others (the export thread, executors) — with export off, off again (the same
proxy twice: the reproducibility), to a live receiver and to a dead port. Counts do not
depend on the machine's load, as CPU time does (benchmarks/otel_overhead.py).

All variants of a tree run at once against one pace server; each proxy starts
uninstrumented (``--instr-atstart=no``: its imports at a few times native speed), is
instrumented and its counters zeroed after three warm-up requests, and dumped when the
load ends (``callgrind_control``).
``--before DIR`` counts an older checkout's proxies too, after ours.

Read it knowing that callgrind slows the proxy ~50×: the export thread's work on
wall-clock timers — a POST every 5 s, the metrics every 10 s, a dead collector's failed
tries on its back-off — falls on far fewer tokens than at full speed, so its share per
token here is an upper bound; the main thread's count is the exact answer to "does
export add work to the request path". ``--batch N`` takes the clock out: a batch of
spans leaves every N finished requests (``OTEL_BSP_MAX_EXPORT_BATCH_SIZE=N``, the
schedule delay and ``[otel] metric_interval_s`` set out of reach), so the export's
rhythm per token is the one of full speed (at benchmarks/otel_overhead.py's ~30
requests a second, a 5 s flush carries ~150 requests: N = 16 is a POST ten times as
often); the metrics' export (~1 ms of CPU every 10 s, per second, not per token) is
then left out of the count, and so is the first batch: the count starts once a batch of
N warm-up requests has left (its one-time work — the HTTP client's first use, a dead
port's first failure and its retries, after which the export rests — is not the steady
state; at full speed a dead collector is tried once a minute), and the count ends once
every variant has rested 20 s (with N = 64 and 256 requests, a last batch still being
built at the dump was a quarter of the export's work, counted or not by chance); a part
batch left queued for the flush timer is not counted, and the script says how many.

    .venv/bin/python -m benchmarks.otel_instructions                       # ~3 min
    .venv/bin/python -m benchmarks.otel_instructions --before /tmp/old     # ~6 min
    .venv/bin/python -m benchmarks.otel_instructions --batch 16            # full speed's rhythm
    .venv/bin/python -m benchmarks.otel_instructions --smoke               # a few requests
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import smoke
from benchmarks.otel_overhead import _closed_port, otel_counts
from benchmarks.proxy_overhead import TIMEOUTS, stream_once
from benchmarks.proxy_paths import free_port, wait_up
from tests.support.fake_server import support_command, support_env
from tests.support.otlp_sink import OtlpSink
from tui.transport.http1 import Http1Pool

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("off", "off-again", "live", "dead")
SETTLE_S = 20.0  # after the load, before the dump: the last batch leaves


def _valgrind_proxy(
    code: Path, pace: str, extra: list[str], out: Path, env_extra: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--instr-atstart=no",
           f"--callgrind-out-file={out}", sys.executable, "-m", "tui", "proxy",
           "--upstream", pace, "--listen", f"127.0.0.1:{port}", "--kind", "openai",
           "--no-ledger", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(code), **env_extra}
    proc = subprocess.Popen(
        cmd, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return proc, f"http://127.0.0.1:{port}"


async def _warm(url: str, pool: Http1Pool, warm: int, tokens: int, exports: bool) -> None:
    """``warm`` requests before the count: the first ones import and build what later ones
    reuse, and with ``exports`` their batch leaves (its first send's one-time work — the
    HTTP client's imports, a dead port's first failure — is not the steady state)."""
    for s in range(warm):
        await stream_once(pool, url, tokens, 10**6 + s)
    if exports:
        await _exported(url, warm)


async def _exported(url: str, n: int) -> tuple[int, int]:
    """Until ``n`` requests' spans have left (sent or dropped), 300 s at most; (spans that
    left, spans queued)."""
    deadline = time.monotonic() + 300
    while True:
        counts = await asyncio.to_thread(otel_counts, url)
        done = counts.get("infertop_otel_spans_exported_total", 0)
        done += counts.get("infertop_otel_spans_dropped_total", 0)
        if done >= n or time.monotonic() > deadline:
            return int(done), int(counts.get("infertop_otel_queued", 0))
        await asyncio.sleep(1.0)


async def _load(
    pid: int,
    url: str,
    requests: int,
    streams: int,
    tokens: int,
    warm: tuple[int, bool],
    settle: float,
) -> int:
    pool = Http1Pool({"User-Agent": "otel-instructions"}, TIMEOUTS)
    await _warm(url, pool, warm[0], tokens, warm[1])
    for ask in ("--instr=on", "-z"):  # counting from here (started uninstrumented: faster)
        await asyncio.to_thread(subprocess.run, ["callgrind_control", ask, str(pid)],
                                capture_output=True)  # fmt: skip
    seeds = list(range(requests))

    async def worker() -> int:
        n = 0
        while seeds:
            one = await stream_once(pool, url, tokens, seeds.pop())
            n += len(one[1]) if one else 0
        return n

    done = sum(await asyncio.gather(*(worker() for _ in range(streams))))
    # the last batch's work counted too: every variant rests ``settle`` before the dump (a
    # batch being built or sent at the load's end finishes; asking each proxy whether it
    # has would add requests to its main thread's count)
    await asyncio.sleep(settle)
    await asyncio.to_thread(subprocess.run, ["callgrind_control", "-d", str(pid)],
                            capture_output=True)  # fmt: skip
    if warm[1]:
        left, queued = await _exported(url, 0)  # (no wait: what has left by now)
        print(f"  {url}: {left - warm[0]} measured requests' spans left, {queued} queued "
              "(a part batch waiting for the flush timer: not counted)")  # fmt: skip
    pool.close()
    return done


def thread_counts(out: Path, pid: int) -> dict[int, int]:
    """Instructions per thread (callgrind's numbering: 1 is the main thread) of the
    dump made at the load's end."""
    counts = {}
    for f in out.parent.glob(f"{out.name.split('%')[0]}{pid}.1-*"):
        text = f.read_text(errors="replace")
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        thread = re.search(r"^thread: (\d+)", text, re.M)
        if total and thread:
            counts[int(thread.group(1))] = int(total.group(1))
    return counts


def measure(code: Path, a: argparse.Namespace, work: Path) -> dict[str, tuple[int, dict[int, int]]]:
    sink = OtlpSink()
    pace_port = free_port()
    pace = subprocess.Popen(
        [*support_command("pace_server"), "--port", str(pace_port), "--interval-ms",
         str(a.interval_ms), "--ttft-ms", "20", "--concurrency", "64"],
        stdout=subprocess.DEVNULL, env=support_env(),
    )  # fmt: skip
    pace_url = f"http://127.0.0.1:{pace_port}"
    procs: dict[str, tuple[subprocess.Popen[bytes], str, Path]] = {}
    env_extra = {}
    if a.batch:  # the export's rhythm by requests, not by callgrind's slow clock
        config = work / "clockless.toml"
        config.write_text("[otel]\nmetric_interval_s = 3600\n")
        env_extra = {
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(a.batch),
            "OTEL_BSP_SCHEDULE_DELAY": str(3600 * 1000),
            "INFERTOP_CONFIG": str(config),
        }
    try:
        wait_up(pace_url + "/health")
        for v in VARIANTS:
            dead = f"http://127.0.0.1:{_closed_port()}"
            extra = {"live": ["--otlp", sink.url], "dead": ["--otlp", dead]}.get(v, [])
            out = work / f"{code.name}-{v}.%p"
            proc, url = _valgrind_proxy(code, pace_url, extra, out, env_extra)
            procs[v] = (proc, url, out)
        for _, url, _ in procs.values():
            wait_up(url + "/infertop/health", timeout=600)

        async def all_loads() -> list[int]:
            return await asyncio.gather(
                *(_load(p.pid, url, a.requests, a.streams, a.tokens,
                        (a.batch or 3, bool(a.batch) and v in ("live", "dead")),
                        SETTLE_S if a.batch else 0.0)
                  for v, (p, url, _) in procs.items())
            )  # fmt: skip

        tokens = asyncio.run(all_loads())
    finally:
        for p, _, _ in procs.values():
            p.terminate()
        for p, _, _ in procs.values():
            p.wait(300)
        pace.terminate()
        sink.stop()
    return {v: (n, thread_counts(out, p.pid)) for (v, (p, _, out)), n in zip(procs.items(), tokens)}


def rows(tree: str, got: dict[str, tuple[int, dict[int, int]]]) -> list[str]:
    out = [f"{tree}: instructions per forwarded token   all threads   main thread   others"
           "   (÷ off: all, main)"]  # fmt: skip
    off_n, off = got["off"]
    off_all, off_main = sum(off.values()) / off_n, off.get(1, 0) / off_n
    for v, (n, counts) in got.items():
        every, main = sum(counts.values()) / n, counts.get(1, 0) / n
        out.append(
            f"  {v:10s} {n:6d} tokens        {every:9.0f}     {main:9.0f}   {every - main:7.0f}"
            f"   ({every / off_all:.4f}, {main / off_main:.4f})"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=48, help="a variant's requests")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--interval-ms", type=float, default=10.0)
    ap.add_argument("--before", type=Path, help="an older checkout's tree, counted after ours")
    ap.add_argument(
        "--batch", type=int, default=0,
        help="a batch of spans every N requests, no timers (the module docstring)",
    )  # fmt: skip
    smoke.add_flag(ap)
    a = ap.parse_args()
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        if a.smoke:
            smoke.skip("needs valgrind (callgrind and callgrind_control): apt-get install valgrind")
        raise SystemExit("needs valgrind (callgrind and callgrind_control)")
    if a.smoke:  # a few short requests a variant: the counting works, nothing measured
        a.requests, a.streams, a.tokens, a.before = 3, 1, 16, None
    rhythm = (f"a batch of spans every {a.batch} requests, no timers" if a.batch else
              "the export's own timers (5 s spans, 10 s metrics)")  # fmt: skip
    print(f"otel_instructions: {a.requests} requests of {a.tokens} tokens a variant, "
          f"{a.streams} streams, a token every {a.interval_ms:g} ms, under callgrind; "
          f"{rhythm}")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="otel-instructions-"))
    try:
        for tree, code in [("ours", ROOT)] + ([("before", a.before)] if a.before else []):
            got = measure(code, a, work)
            print("\n".join(rows(tree, got)))
            for v, (n, counts) in got.items():
                if n != a.requests * a.tokens:
                    raise SystemExit(f"{tree} {v}: {n} tokens of {a.requests * a.tokens} sent")
                if not counts.get(1):
                    raise SystemExit(f"{tree} {v}: callgrind counted no main thread")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.smoke:
        smoke.passed(
            f"{len(VARIANTS)} proxies under callgrind, every token, every main thread counted"
        )


if __name__ == "__main__":
    main()
