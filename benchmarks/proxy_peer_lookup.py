"""What finding a loopback peer's owner costs `infertop proxy` on a machine with many
sockets (issue 43, item 5): before, ``/proc/net/tcp`` parsed line by line on the event
loop; now netlink's exact lookup on the loop, and the table (searched, not parsed) on a
thread where netlink is refused (tui/proxy/peer.py).

Helper processes hold --sockets loopback TCP sockets open (connected pairs), so the
kernel's table has that many lines; then one connection's peer is looked up each way,
--repeat times, inside a running event loop with a 1 ms ticker beside it: the time of
the lookup (p50) and the longest the ticker was held up (the stall every stream through
the proxy would see). The issue measured ~115 ms per lookup at 50k sockets.

    .venv/bin/python -m benchmarks.proxy_peer_lookup [--sockets 50000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

from benchmarks import smoke
from tui.proxy import peer

PER_HELPER = 8000  # connections (2 sockets each) per helper process, within its fd limit

HOLD = """
import socket, sys, resource
n = int(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
srv = socket.create_server(("127.0.0.1", 0), backlog=4096)
held = []
for _ in range(n):
    c = socket.create_connection(srv.getsockname())
    s, _a = srv.accept()
    held += [c, s]
print(len(held), flush=True)
sys.stdin.read()
"""


def parsed_on_the_loop(p: tuple[str, int], o: tuple[str, int]) -> int | None:
    """The lookup as it was before (tui/proxy/peer.py at 9f9ebdb): the whole table read
    and parsed line by line, IPv4 here."""

    def hexed(host: str, port: int) -> str:
        ip = ipaddress.ip_address(host)
        return f"{struct.pack('<I', int.from_bytes(ip.packed, 'big')).hex().upper()}:{port:04X}"

    pk, ok = hexed(*p), hexed(*o)
    with open("/proc/net/tcp", "rb") as f:
        text = f.read(peer.TABLE_LIMIT).decode("ascii", "replace")
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 7 and fields[1] == pk and fields[2] == ok:
            return int(fields[7])
    return None


class Ticker:
    """A task that wakes every millisecond, keeping the gaps between its wake-ups."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.stop = False

    async def run(self) -> None:
        last = time.perf_counter()
        while not self.stop:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now


async def timed(
    lookup: Callable[[], Awaitable[int | None]], repeat: int
) -> tuple[list[float], list[float], int | None]:
    """(lookup ms each time, the ticker's longest gap ms each time, the answer)."""
    took, stalls = [], []
    found = None
    for _ in range(repeat):
        ticker = Ticker()
        task = asyncio.create_task(ticker.run())
        await asyncio.sleep(0.01)
        ticker.gaps.clear()
        t0 = time.perf_counter()
        found = await lookup()
        took.append((time.perf_counter() - t0) * 1e3)
        await asyncio.sleep(0.005)
        ticker.stop = True
        await task
        stalls.append(max(ticker.gaps) * 1e3 if ticker.gaps else 0.0)
    return took, stalls, found


async def measure(repeat: int) -> list[int | None]:
    """Print each way's lookup time and stall; return what each way found."""
    founds: list[int | None] = []
    srv = socket.create_server(("127.0.0.1", 0))
    with srv, socket.create_connection(srv.getsockname()):
        conn, them = srv.accept()
        p, o = (them[0], them[1]), srv.getsockname()[:2]
        with conn:

            async def before() -> int | None:
                return parsed_on_the_loop(p, o)

            async def netlink() -> int | None:
                return peer.netlink_owner(p, o)

            async def table_thread() -> int | None:
                return await asyncio.to_thread(peer.table_owner, p, o)

            print(f"{'way':<42} {'lookup p50 ms':>14} {'loop held up, max ms':>21}  uid")
            for name, fn in (
                ("before: the table parsed on the loop", before),
                ("now: netlink, on the loop", netlink),
                ("now, netlink refused: the table, a thread", table_thread),
            ):
                took, stalls, found = await timed(fn, repeat)
                founds.append(found)
                print(f"{name:<42} {statistics.median(took):>14.2f} "
                      f"{max(stalls):>21.2f}  {found}")  # fmt: skip
    return founds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sockets", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=7)
    smoke.add_flag(ap)
    args = ap.parse_args()
    if args.smoke:
        args.sockets, args.repeat = 2000, 1
    if not peer.HAS_TABLE:
        if args.smoke:
            smoke.skip("Linux only (/proc/net/tcp, netlink)")
        print("Linux only (/proc/net/tcp, netlink)")
        return 0
    helpers = []
    pairs = args.sockets // 2
    try:
        while pairs > 0:
            n = min(PER_HELPER, pairs)
            pairs -= n
            helpers.append(subprocess.Popen([sys.executable, "-c", HOLD, str(n)],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            text=True))  # fmt: skip
        held = sum(int(h.stdout.readline() or 0) for h in helpers if h.stdout)
        with open("/proc/net/tcp", "rb") as f:
            lines = f.read().count(b"\n") - 1
        print(f"{held} sockets held by {len(helpers)} helpers; /proc/net/tcp: {lines} lines")
        founds = asyncio.run(measure(args.repeat))
        if args.smoke:
            smoke.check(held == args.sockets, f"{held} of {args.sockets} sockets held")
            smoke.check(lines >= held, f"/proc/net/tcp has {lines} lines for {held} sockets")
            uid = os.getuid()
            smoke.check(founds[0] == uid and founds[2] == uid, f"owners found: {founds}")
            smoke.passed(f"{held} sockets held; the owner found by every way: {founds}")
    finally:
        for h in helpers:
            if h.stdin:
                h.stdin.close()
            h.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
