"""Where a request's time goes inside `infertop proxy` before it reaches the upstream.

The proxy runs in its own process (this file with ``--serve``), its request path timed
with ``perf_counter_ns`` at the points it passes (the functions wrapped here, nothing
changed in tui/): the client's bytes handed to the connection (``data_received``), a
plain head matched (tui/proxy/plain_head.py), the head parse begun and done, the request
complete (``ClientRequest``), the upstream send from the read callback begun and
returned (``send_now``: the send itself), and the exchange's task started (``forward``).
A plain request is sent before its head is parsed; any other (or every one, with
--strict) is parsed, then its upstream head built and sent (its ``Exchange``). The
segments are printed in the order the points came, for the requests that took the most
common way; a request with no kept-alive upstream connection is sent from its task
instead, and left out. A client in this process sends --requests one-stream
requests (4 tokens, a token every 10 ms) to a pace server (tests/support/pace_server.py)
through it and, interleaved, directly; each segment's p50 / p90 is printed, and each
path's TTFT − first-token lag (the request's way in: TTFT minus the first token's way
out) for scale. The first 5 requests are left out (warm-up).

This is the one-stream TTFT path of benchmarks/proxy_overhead.py (goal: added TTFT p50
≤ 0.3 ms): between requests the proxy sleeps 20+ ms while the client and the server run,
so its path runs with cold caches, and Python code costs several times what a loop of
the same calls costs hot (the head parse: ~9 µs hot, ~50 µs here).

    .venv/bin/python -m benchmarks.proxy_request_path [--requests 41] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks import smoke

ROOT = Path(__file__).resolve().parents[1]

POINTS = ["bytes in", "head matched", "parse begun", "parse done", "request whole"]
POINTS += ["send begun", "send returned", "task runs"]


def serve(upstream: str, port: int, strict: bool) -> None:
    """The proxy, its request path wrapped with stamps; prints the segments on SIGTERM.
    ``strict``: no request is taken as plain (each takes the strict path)."""
    from tui.proxy import client_conn, exchange
    from tui.proxy.server import Proxy, ProxyConfig, run_loop

    pc = time.perf_counter_ns
    requests: list[dict[str, int]] = []

    def mark(name: str) -> None:
        if requests:
            requests[-1].setdefault(name, pc())

    data_received = client_conn.ClientConnection.data_received

    def data_in(self: Any, data: bytes) -> None:
        if self.task is None and self.head is None:
            requests.append({"bytes in": pc()})
        data_received(self, data)

    match_plain = client_conn.match_plain

    def matched(buf: Any, end: int) -> Any:
        m = None if strict else match_plain(buf, end)
        if m is not None:
            mark("head matched")
        return m

    parse = client_conn.parse_request_head

    def parse_head(raw: bytes) -> Any:
        mark("parse begun")
        head = parse(raw)
        mark("parse done")
        return head

    whole = client_conn.ClientRequest

    def request(*a: Any) -> Any:
        mark("request whole")
        return whole(*a)

    run_forward = client_conn.forward

    async def forwarded(*a: Any) -> Any:
        mark("task runs")
        return await run_forward(*a)

    send_now = exchange.send_now

    def sent(conn: Any, message: bytes) -> Any:
        mark("send begun")
        early = send_now(conn, message)
        mark("send returned")
        return early

    client_conn.ClientConnection.data_received = data_in  # type: ignore[method-assign]
    client_conn.match_plain = matched
    client_conn.parse_request_head = parse_head
    client_conn.ClientRequest = request  # type: ignore[misc, assignment]
    client_conn.forward = forwarded
    client_conn.send_now = sent
    exchange.send_now = sent  # (the Exchange's, on the strict path)

    def report(*_: Any) -> None:
        done = [r for r in requests if "send returned" in r and "task runs" in r][5:]
        paths = Counter(tuple(sorted(r, key=r.__getitem__)) for r in done)
        order, _n = paths.most_common(1)[0]
        rows = [r for r in done if tuple(sorted(r, key=r.__getitem__)) == order]
        for a, b in zip(order, order[1:]):
            d = sorted((r[b] - r[a]) / 1e3 for r in rows)
            print(f"{a:>13} → {b:<13} p50 {statistics.median(d):6.1f} µs  p90 "
                  f"{d[int(len(d) * 0.9)]:6.1f} µs")  # fmt: skip
        total = [(r["send returned"] - r["bytes in"]) / 1e3 for r in rows]
        other = len(done) - len(rows)
        print(f"bytes in → send returned: p50 {statistics.median(total):.1f} µs "
              f"({len(rows)} requests; {other} another way)", flush=True)  # fmt: skip
        sys.exit(0)

    async def main() -> None:
        config = ProxyConfig(upstream=upstream, kind="openai", listen_port=port)
        await Proxy(config).start()
        print("up", flush=True)
        await asyncio.Event().wait()

    signal.signal(signal.SIGTERM, report)
    run_loop(main())


def measure(requests: int, strict: bool) -> tuple[dict[str, Any], str]:
    """Prints the run; returns each path's results and what the proxy's stamps said."""
    from benchmarks import proxy_overhead as po
    from benchmarks.proxy_paths import free_port, start_servers, wait_up
    from tui.transport.http1 import Http1Pool

    servers = start_servers(10.0, 16, None)
    port = free_port()
    here = [sys.executable, "-m", "benchmarks.proxy_request_path", "--serve", servers.pace_url]
    here += [str(port)]
    here += ["--strict"] if strict else []
    proxy = subprocess.Popen(here, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proxy.stdout is not None
    try:
        proxy.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        wait_up(url + "/infertop/health")
        paths = {"direct": servers.paths["direct"], "ours": url}

        class Paths:
            pace_url = servers.pace_url

        Paths.paths = paths  # type: ignore[attr-defined]

        async def run() -> dict[str, Any]:
            pools = {n: Http1Pool({"User-Agent": "request-path"}, po.TIMEOUTS) for n in paths}
            res = {n: po.Result() for n in paths}
            seed = [70_000]
            for i in range(requests):
                order = list(paths) if i % 2 else list(paths)[::-1]
                await po.latency_round(pools, Paths, order, 1, 4, res, seed)  # type: ignore[arg-type]
            for pool in pools.values():
                pool.close()
            return res

        res = asyncio.run(run())
        for name, r in res.items():
            way_in = statistics.median(a - b for a, b in zip(r.ttft_ms, r.first_lag_ms))
            print(f"{name:>6}: TTFT − first-token lag p50 {way_in:.3f} ms, first-token lag p50 "
                  f"{statistics.median(r.first_lag_ms):.3f} ms, failed {r.failed}")  # fmt: skip
    finally:
        proxy.send_signal(signal.SIGTERM)
        out, _ = proxy.communicate(timeout=30)
        print(out, end="")
        servers.stop()
    return res, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=41)
    ap.add_argument("--strict", action="store_true", help="no request taken as plain")
    ap.add_argument("--serve", nargs=2, metavar=("UPSTREAM", "PORT"), help=argparse.SUPPRESS)
    smoke.add_flag(ap)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.strict)
        return 0
    if not args.smoke:
        measure(args.requests, args.strict)
        return 0
    for strict in (False, True):  # both ways a request can take, 8 requests (5 warm-up)
        res, out = measure(8, strict)
        for name, r in res.items():
            smoke.check(len(r.ttft_ms) == 8 and not r.failed, f"{name}: {r.failed} failed")
        smoke.check("bytes in → send returned" in out, f"the proxy's stamps: {out!r}")
    smoke.passed("8 requests direct and through the stamped proxy, plain and strict")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
