"""The `infertop proxy` cases of benchmarks/hostile_endpoint.py: hostile clients and a
hostile upstream against the proxy (issue 43).

Each case starts ``python -m tui proxy`` (its own process, as a user runs it) in front of
the hostile server (tests/support/hostile_server.py), attacks it, and reports the wall
time of the attack, how it ended, and the *proxy's* memory: its RSS once it listens and
its peak (``VmHWM``) after the attack, from /proc.

- proxy-body-flood: 24 clients each send 30 MiB of a 32 MiB body and stop (default
  limits: --max-body-mb 32, --body-budget-mb 256) [the body budget]
- proxy-body-heads: 8 heads declaring 32 MiB each from 127.0.0.2-9, then a POST from
  127.0.0.1 [a body holds the bytes that came, not its Content-Length]
- proxy-body-stalled: 8 clients from 127.0.0.2-9 each send all but a byte of a 32 MiB
  body and stall (256 MiB: the whole budget), then a POST [the body that made no
  progress the longest is dropped to make room; one user's share: half the budget]
- proxy-request-scan: 30 MiB bodies of ``[[],[],…]``, then ``{"input":[[],[],…]}``,
  each POSTed to /v1/embeddings while a probe asks the proxy's /infertop/health every
  5 ms: the probe's longest wait [the body's fields read by a bounded scan]
- proxy-idle-flood: another user (nobody, as root) holds 1,050 idle sockets from
  127.0.0.2-9; then the proxy's owner attaches its watch and sends a request [slots per
  user on loopback, the longest idle closed to make room]
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
    "proxy-body-heads",
    "proxy-body-stalled",
    "proxy-request-scan",
    "proxy-idle-flood",
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


# the proxy's code: this tree's, or another's to compare with (a checkout of older code)
PROXY_CODE = Path(os.environ.get("INFERTOP_PROXY_CODE") or ROOT)
SOURCES = [f"127.0.0.{i}" for i in range(2, 10)]


class _Proxy:
    """``python -m tui proxy`` in front of ``upstream``, until closed."""

    def __init__(self, upstream: str, *flags: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(PROXY_CODE), "INFERTOP_CONFIG": ""}
        argv = [sys.executable, "-m", "tui", "proxy", "--upstream", upstream, "--kind"]
        argv += ["openai", "--listen", "127.0.0.1:0", "--no-engine-truth", *flags]
        self.proc = subprocess.Popen(  # (cwd: `-m` puts it first on the path)
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
            cwd=PROXY_CODE,
        )  # fmt: skip
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


def _small_post(proxy: _Proxy, source: str = "127.0.0.1") -> str:
    """A small POST's status and time, as a client other than the attackers sees it."""
    with proxy.connect(source) as s:
        t0 = time.perf_counter()
        s.sendall(b"POST /v1/models HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}")
        try:
            head, _ = _read_framed(s, 30)
        except OSError as e:
            return f"no answer ({e})"
        return f"{head[9:12].decode()} in {(time.perf_counter() - t0) * 1e3:.0f} ms"


def _body_heads(proxy: _Proxy) -> str:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\nContent-Length: %d\r\n\r\n"
    heads = [proxy.connect(source) for source in SOURCES]
    for s in heads:
        s.sendall(head % (32 * MIB))
    time.sleep(0.3)
    got = _small_post(proxy)
    for s in heads:
        s.close()
    return f"8 heads of 32 MiB held; another client's POST: {got}"


def _dropped(s: socket.socket) -> bool:
    """Whether the proxy answered ``s`` (a 503) or closed it; False: still open."""
    s.settimeout(0.2)
    try:
        return s.recv(4096)[:12] in (b"HTTP/1.1 503", b"")
    except TimeoutError:
        return False
    except OSError:
        return True  # (reset)


def _body_stalled(proxy: _Proxy) -> str:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\nContent-Length: %d\r\n\r\n"
    block = memoryview(b"x" * (32 * MIB - 1))
    uploads = [proxy.connect(source) for source in SOURCES]
    cut = 0
    for s in uploads:
        try:
            s.sendall(head % (32 * MIB))
            s.settimeout(30)
            s.sendall(block)
        except OSError:
            cut += 1  # dropped (or refused) while sending
    time.sleep(0.5)
    got = _small_post(proxy)
    dropped = sum(_dropped(s) for s in uploads)
    for s in uploads:
        s.close()
    return f"8 x 32 MiB stalled ({cut} cut while sending, {dropped} dropped); a POST: {got}"


def _request_scan(proxy: _Proxy) -> str:
    """Each hostile body, with a probe of the proxy's own route every 5 ms meanwhile."""
    import threading

    out = []
    for label, body in (
        ("[[],[],…]", b"[" + b"[]," * (10 * MIB) + b"[]]"),
        ('{"input":[[],[],…]}', b'{"input":[' + b"[]," * (10 * MIB) + b'[]],"model":"m"}'),
    ):
        waits: list[float] = []
        stop = threading.Event()

        def probe(stop: threading.Event = stop, waits: list[float] = waits) -> None:
            with proxy.connect() as p:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    p.sendall(b"GET /infertop/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    _read_framed(p, 30)
                    waits.append(time.perf_counter() - t0)
                    time.sleep(0.005)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        time.sleep(0.2)
        head = b"POST /v1/embeddings HTTP/1.1\r\nHost: p\r\nContent-Length: %d\r\n\r\n"
        t0 = time.perf_counter()
        with proxy.connect() as s:
            s.settimeout(60)
            s.sendall(head % len(body))
            s.sendall(body)
            status = _status(s, 60).decode() or "-"
        took = time.perf_counter() - t0
        time.sleep(0.2)
        stop.set()
        prober.join(30)
        worst = max(waits) * 1e3 if waits else float("nan")
        out.append(f"{label}: {status} in {took:.2f} s, probe's longest wait {worst:.0f} ms")
    return "; ".join(out)


HOLD_AS_NOBODY = """
import os, resource, socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
"x".encode("idna")
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
os.setgid(65534); os.setuid(65534)
held = []
for i in range(n):
    try:
        held.append(socket.create_connection((host, port), 10, (f"127.0.0.{2 + i % 8}", 0)))
    except OSError:
        pass
print("ready", len(held), flush=True)
sys.stdin.read()
"""


def _idle_flood(proxy: _Proxy) -> str:
    if os.geteuid() != 0:
        return "skipped: needs root (to become nobody)"
    host, port = proxy.address
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_AS_NOBODY, host, str(port), "1050"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        ready = child.stdout.readline().split()[-1]
        time.sleep(0.5)  # the proxy has accepted its backlog
        with proxy.connect() as s:
            t0 = time.perf_counter()
            s.sendall(b"GET /infertop/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            watch = _status(s, 10).decode() or "no answer"
            took = (time.perf_counter() - t0) * 1e3
        got = _small_post(proxy)
    finally:
        child.kill()
        child.wait(10)
    owner = f"the owner's watch: {watch} in {took:.0f} ms, a POST: {got}"
    return f"nobody holds {ready} idle sockets; {owner}"


def proxy_case(name: str, base: str) -> dict[str, Any]:
    """One case (see the module docstring), in this process; the proxy in its own."""
    upstream = {"proxy-conn-cl": f"{base}/conn-cl", "proxy-cl-te": f"{base}/cl-te"}
    flags = ("--max-clients", "8") if name == "proxy-per-address" else ()
    proxy = _Proxy(upstream.get(name, f"{base}/ansi"), *flags)
    try:
        t0 = time.perf_counter()
        if name == "proxy-body-flood":
            ended = _flood(proxy)
        elif name == "proxy-body-heads":
            ended = _body_heads(proxy)
        elif name == "proxy-body-stalled":
            ended = _body_stalled(proxy)
        elif name == "proxy-request-scan":
            ended = _request_scan(proxy)
        elif name == "proxy-idle-flood":
            ended = _idle_flood(proxy)
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
