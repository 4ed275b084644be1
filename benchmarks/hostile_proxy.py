"""The `infertop proxy` cases of benchmarks/hostile_endpoint.py: hostile clients and a
hostile upstream against the proxy (issue 43).

Each case starts ``python -m tui proxy`` (its own process, as a user runs it) in front of
the hostile server (tests/support/hostile_server.py), attacks it, and reports the wall
time of the attack, how it ended, and the *proxy's* memory: its RSS once it listens and
its peak (``VmHWM``) after the attack, from /proc.

- proxy-body-flood: 24 clients each send 30 MiB of a 32 MiB body and stop (default
  limits: --max-body-mb 32, --body-budget-mb 256) [the body budget]
- proxy-host-origin: the owner's routes asked with a rebound Host, an Origin, no Host
  [each a 403]
- proxy-per-address: --max-clients 8, 8 silent sockets from 127.0.0.1, then a client
  from 127.0.0.2 [half of --max-clients from one address]
- proxy-conn-cl: an upstream whose Connection field lists Content-Length, a keep-alive
  client [the length kept: the answer read at once, not at the 75 s idle timeout]
- proxy-cl-te: an upstream answer with Content-Length and Transfer-Encoding [passed on by
  its chunks, without the Content-Length]
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROXY_CASES = (
    "proxy-body-flood",
    "proxy-host-origin",
    "proxy-per-address",
    "proxy-conn-cl",
    "proxy-cl-te",
)
MIB = 1024 * 1024
FLOOD_CLIENTS = 24
FLOOD_BYTES = 30 * MIB


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class _Proxy:
    """``python -m tui proxy`` in front of ``upstream``, until closed."""

    def __init__(self, upstream: str, *flags: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "INFERTOP_CONFIG": ""}
        argv = [sys.executable, "-m", "tui", "proxy", "--upstream", upstream, "--kind"]
        argv += ["openai", "--listen", "127.0.0.1:0", "--no-engine-truth", *flags]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("infertop proxy listening on http://"):
            self.proc.kill()
            raise SystemExit(f"the proxy did not start: {line!r}")
        host, port = line.rsplit("/", 1)[1].strip().rsplit(":", 1)
        self.address = (host, int(port))
        time.sleep(0.3)  # settled: its RSS at rest
        self.rss_kib = _status_kib(self.proc.pid, "VmRSS")

    def connect(self, source: str = "127.0.0.1") -> socket.socket:
        return socket.create_connection(self.address, timeout=10, source_address=(source, 0))

    def peak_over_mib(self) -> float:
        return max(0, _status_kib(self.proc.pid, "VmHWM") - self.rss_kib) / 1024

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _status(s: socket.socket, timeout: float) -> bytes:
    """The status code of the answer on ``s`` (b"" if none came)."""
    s.settimeout(timeout)
    try:
        got = s.recv(4096)
    except OSError:
        return b""
    return got.split(b" ", 2)[1] if got.startswith(b"HTTP/1.1 ") else b""


def _read_framed(s: socket.socket, timeout: float) -> tuple[bytes, bytes]:
    """One answer read by its own framing, as a keep-alive client reads it: (head, body);
    no length and no chunks means until the close."""
    s.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, _, rest = buf.partition(b"\r\n\r\n")
    low = head.lower()
    if b"transfer-encoding: chunked" in low:
        while not rest.endswith(b"0\r\n\r\n"):
            rest += s.recv(65536)
        body, out = rest, b""
        while body:
            size, _, body = body.partition(b"\r\n")
            n = int(size, 16)
            out, body = out + body[:n], body[n + 2 :]
            if n == 0:
                break
        return head, out
    for line in low.split(b"\r\n")[1:]:
        if line.startswith(b"content-length:"):
            n = int(line.split(b":")[1])
            while len(rest) < n:
                rest += s.recv(65536)
            return head, rest[:n]
    while data := s.recv(65536):
        rest += data
    return head, rest


def _flood(proxy: _Proxy) -> str:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\nContent-Length: %d\r\n\r\n"
    block = memoryview(b"x" * FLOOD_BYTES)
    clients: list[socket.socket] = []
    refused = failed = 0
    for _ in range(FLOOD_CLIENTS):
        s = proxy.connect()
        clients.append(s)
        try:
            s.sendall(head % (32 * MIB))
            if _status(s, 0.05) == b"503":
                refused += 1
                continue
            s.settimeout(30)
            s.sendall(block)
        except OSError as e:
            failed += 1
            why = str(e)
    time.sleep(0.5)  # the proxy has read what the kernel held
    for s in clients:
        s.close()
    sent = FLOOD_CLIENTS - refused - failed
    out = f"{refused} of {FLOOD_CLIENTS} refused (503), {sent} sent 30 MiB"
    return out + (f", {failed} failed sending ({why})" if failed else "")


def _host_origin(proxy: _Proxy) -> str:
    port = proxy.address[1]
    codes = []
    for path, fields in (
        ("/infertop/requests/x?text=1", f"Host: evil.example:{port}\r\n"),
        ("/infertop/events", f"Host: evil.example:{port}\r\n"),
        ("/infertop/events", f"Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example\r\n"),
        ("/infertop/events", ""),
        ("/infertop/requests/x", f"Host: 127.0.0.1:{port}\r\n"),
    ):
        with proxy.connect() as s:
            s.sendall(f"GET {path} HTTP/1.1\r\n{fields}Connection: close\r\n\r\n".encode())
            codes.append(_status(s, 5).decode() or "-")
    return "rebound Host, same on events, Origin, no Host, own Host: " + " ".join(codes)


def _per_address(proxy: _Proxy) -> str:
    silent = [proxy.connect() for _ in range(8)]
    refused = sum(_status(s, 0.3) == b"503" for s in silent)
    with proxy.connect("127.0.0.2") as s:
        t0 = time.perf_counter()
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
        head, _ = _read_framed(s, 10)
        took = (time.perf_counter() - t0) * 1e3
    for s in silent:
        s.close()
    return f"{refused} of 8 silent refused; 127.0.0.2: {head[9:12].decode()} in {took:.1f} ms"


def _framing(proxy: _Proxy) -> str:
    with proxy.connect() as s:
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
        try:
            head, body = _read_framed(s, 90)
        except TimeoutError:
            return "no answer within 90 s"
    low = head.lower()
    fields = [f for f in (b"content-length", b"transfer-encoding") if f + b":" in low]
    whole = body.endswith(b"]}")
    return f"{b', '.join(fields).decode() or 'no length'}; body {'whole' if whole else 'wrong'}"


def proxy_case(name: str, base: str) -> dict[str, Any]:
    """One case (see the module docstring), in this process; the proxy in its own."""
    upstream = {"proxy-conn-cl": f"{base}/conn-cl", "proxy-cl-te": f"{base}/cl-te"}
    flags = ("--max-clients", "8") if name == "proxy-per-address" else ()
    proxy = _Proxy(upstream.get(name, f"{base}/ansi"), *flags)
    try:
        t0 = time.perf_counter()
        if name == "proxy-body-flood":
            ended = _flood(proxy)
        elif name == "proxy-host-origin":
            ended = _host_origin(proxy)
        elif name == "proxy-per-address":
            ended = _per_address(proxy)
        else:
            ended = _framing(proxy)
        took = time.perf_counter() - t0
        return {"case": name, "wall_s": took, "rss_before_mib": proxy.rss_kib / 1024,
                "peak_over_mib": proxy.peak_over_mib(), "ended": ended}  # fmt: skip
    finally:
        proxy.close()
