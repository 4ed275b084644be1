"""The floor under any Python streaming client here: read the streams, do nothing else.

A reference for benchmarks/client_throughput.py, not a client: on uvloop, ``--concurrency``
keep-alive connections each POST ``--requests`` / concurrency streamed /v1/completions
requests back to back, and a read callback per socket takes each read with ``recvmsg``
and its kernel receive stamp (``SO_TIMESTAMPNS``, as infertop does) and looks only for
the body's last chunk. No HTTP parsing, no SSE, no JSON, no record. Its CPU per token is
what the event loop and the system calls cost on this machine; a real client's figure
minus this one is what its parsing and bookkeeping cost.

    python benchmarks/bare_reader.py --url http://127.0.0.1:PORT [--requests 512]
        [--concurrency 16] [--prompt 64] [--output 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from urllib.parse import urlsplit

SO_TIMESTAMPNS = 35
LAST_CHUNK = b"0\r\n\r\n"  # a chunked body's end (the pace server sends no trailers)


def request_bytes(host: str, prompt: int, output: int) -> bytes:
    body = json.dumps(
        {
            "model": "pace",
            "prompt": " ".join(["word"] * prompt),
            "max_tokens": output,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def stream_many(url: str, n: int, message: bytes) -> int:
    """``n`` requests back to back on one keep-alive connection; returns how many ended."""
    loop = asyncio.get_running_loop()
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port))
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    done: asyncio.Future[None] | None = None
    tail = b""  # the last bytes read (the last chunk may come split over two reads)

    def on_readable() -> None:
        nonlocal tail
        data, _anc, _flags, _addr = sock.recvmsg(1024, 64)
        tail = (tail + data)[-len(LAST_CHUNK) :]
        if (not data or tail == LAST_CHUNK) and done is not None and not done.done():
            tail = b""
            done.set_result(None)

    loop.add_reader(sock.fileno(), on_readable)
    ended = 0
    try:
        for _ in range(n):
            done = loop.create_future()
            await loop.sock_sendall(sock, message)
            await done
            ended += 1
    finally:
        loop.remove_reader(sock.fileno())
        sock.close()
    return ended


async def run(a: argparse.Namespace) -> int:
    """Every request of the run; returns how many ended."""
    message = request_bytes(urlsplit(a.url).netloc, a.prompt, a.output)
    c = a.concurrency
    share = [a.requests // c + (i < a.requests % c) for i in range(c)]
    return sum(await asyncio.gather(*(stream_many(a.url, n, message) for n in share if n)))


def smoke_run(a: argparse.Namespace) -> None:
    """``--smoke``: 8 requests of 8 tokens from a pace server on a thread; every one ends
    and the server sent every token."""
    from benchmarks import smoke
    from tests.support import pace_server

    port, server, stop = pace_server.start_in_thread(pace_server.PaceConfig(interval_ms=1))
    try:
        a.url, a.requests, a.concurrency, a.prompt, a.output = (
            f"http://127.0.0.1:{port}",
            8,
            4,
            8,
            8,
        )
        ended = asyncio.run(run(a))
    finally:
        stop()
    sent = sum(len(v) for v in server.sent_ns.values())
    smoke.check(ended == 8, f"{ended} of 8 requests ended")
    smoke.check(sent == 8 * 8, f"the server sent {sent} of 64 tokens")
    smoke.passed("8 requests read to their last chunk, 64 tokens")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="the server (not with --smoke: it starts one)")
    ap.add_argument("--requests", type=int, default=512)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--output", type=int, default=256)
    ap.add_argument("--smoke", action="store_true", help="a pace server, 8 requests, checked")
    a = ap.parse_args()  # (no smoke.add_flag: run by path, it imports nothing of benchmarks)
    if a.smoke:
        smoke_run(a)
        return
    if not a.url:
        ap.error("--url is required")
    try:
        import uvloop
    except ImportError:
        asyncio.run(run(a))
    else:
        uvloop.run(run(a))


if __name__ == "__main__":
    main()
