"""The three paths benchmarks/proxy_overhead.py compares, started as processes: a pace
server (tests/support/pace_server.py), nginx in front of it as a streaming proxy (Debian's,
configured as RECIPES.md says, run from a temporary folder), and `infertop proxy` in front
of it. Plus the CPU reading both proxies are charged by (utime + stime from /proc).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.fake_server import support_command, support_env
from tui.core.sched_slice import SliceResult, request_slice

ROOT = Path(__file__).resolve().parents[1]

TICKS = os.sysconf("SC_CLK_TCK")
NGINX_CONF = """
daemon off;
worker_processes 1;
{user}
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  upstream pace {{ server 127.0.0.1:{upstream}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://pace;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_cache off;
      proxy_read_timeout 600s;
    }}
  }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def start_pace(interval_ms: float, concurrency: int, procs: list[subprocess.Popen[bytes]]) -> str:
    """The pace server (tests/support/pace_server.py: 20 ms to the first token, then a
    token every ``interval_ms``) on a free port; its URL once it answers. Its process
    joins ``procs``."""
    port = free_port()
    procs.append(
        subprocess.Popen(
            [
                *support_command("pace_server"),
                "--port",
                str(port),
                "--interval-ms",
                str(interval_ms),
                "--ttft-ms",
                "20",
                "--concurrency",
                str(concurrency),
                "--stamps-kept",
                "4096",
            ],
            stdout=subprocess.DEVNULL,
            env=support_env(),
        )  # fmt: skip
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(url + "/health")
    return url


def wait_up(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) of these processes so far."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


@dataclass
class Servers:
    pace_url: str
    paths: dict[str, str]  # name -> base URL
    cpu_pids: dict[str, list[int]]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workdir: Path = field(default_factory=Path)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(5)


def request_for_process(pid: int, ns: int) -> list[SliceResult]:
    """:func:`request_slice` for every thread of process ``pid`` (to give nginx the slice
    ours asks for, and compare like with like)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError as e:
        return [SliceResult(ns, None, f"cannot list the threads of {pid}: {e.strerror}")]
    return [request_slice(ns, tid) for tid in tids]


def start_ours(
    pace: str,
    slice_ms: float | None,
    events: Path | None,
    code: Path = ROOT,
    ledger: Path | None = None,
) -> tuple[Any, str]:
    """``infertop proxy`` in front of ``pace`` (``slice_ms``: its --slice-ms, None: its
    default; ``code``: the tree whose tui/ runs, this one or an older checkout's;
    ``ledger``: its request ledger there, None: ``--no-ledger``, so a benchmark never
    writes to the user's own — an older checkout, which has no ledger, is given neither):
    (process, URL)."""
    port = free_port()
    cmd = [sys.executable, "-m", "tui", "proxy", "--upstream", pace, "--listen",
           f"127.0.0.1:{port}", "--kind", "openai"]  # fmt: skip
    cmd += ["--ledger", str(ledger)] if ledger is not None else ["--no-ledger"]
    if slice_ms is not None:
        cmd += ["--slice-ms", f"{slice_ms:g}"]
    if events is not None:
        cmd += ["--events", str(events)]
    if code == ROOT:
        cmd += ["--ledger", str(ledger)] if ledger is not None else ["--no-ledger"]
    env = {**os.environ, "PYTHONPATH": str(code)}  # (cwd too: `-m` puts it first)
    ours = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=code, env=env
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(url + "/infertop/health")
    return ours, url


def start_servers(
    interval_ms: float,
    concurrency: int,
    events: Path | None,
    nginx_slice_ms: float = 0.0,
    default_slice_too: bool = False,
    before: Path | None = None,
    ledger_too: bool = False,
) -> Servers:
    """The pace server, nginx and ours; ``nginx_slice_ms``: give nginx's processes that
    scheduler slice (tui/core/sched_slice.py), as ours asks for its own; ``default_slice_too``:
    also ours with the kernel's default slice, as the path ``ours@default``; ``before``:
    also the proxy of another checkout (older code), as the path ``before``; ``ledger_too``:
    ours writes its request ledger (a file in the run's folder), and ``ours@no-ledger``
    is the same proxy with ``--no-ledger``."""
    work = Path(tempfile.mkdtemp(prefix="proxy-overhead-"))
    procs: list[subprocess.Popen[bytes]] = []
    pace = start_pace(interval_ms, concurrency, procs)
    pace_port = int(pace.rsplit(":", 1)[1])
    paths = {"direct": pace}
    cpu_pids: dict[str, list[int]] = {}
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if nginx:
        port = free_port()
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (work / d).mkdir()
        user = "user root;" if os.geteuid() == 0 else ""
        conf = work / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=work, upstream=pace_port, port=port, user=user))
        p = subprocess.Popen([nginx, "-c", str(conf), "-p", str(work)], stderr=subprocess.DEVNULL)
        procs.append(p)
        paths["nginx"] = f"http://127.0.0.1:{port}"
        wait_up(paths["nginx"] + "/health")
        import psutil

        cpu_pids["nginx"] = [p.pid] + [c.pid for c in psutil.Process(p.pid).children()]
        if nginx_slice_ms:
            for pid in cpu_pids["nginx"]:
                for r in request_for_process(pid, round(nginx_slice_ms * 1e6)):
                    if not r.granted:
                        raise SystemExit(f"nginx's slice: {r.describe()}")
    if default_slice_too:
        ours, paths["ours@default"] = start_ours(pace, 0.0, None)
        procs.append(ours)
        cpu_pids["ours@default"] = [ours.pid]
    if before is not None:
        old, paths["before"] = start_ours(pace, None, None, before)
        procs.append(old)
        cpu_pids["before"] = [old.pid]
    if ledger_too:
        bare, paths["ours@no-ledger"] = start_ours(pace, None, None)
        procs.append(bare)
        cpu_pids["ours@no-ledger"] = [bare.pid]
    ledger = work / "ledger.sqlite3" if ledger_too else None
    ours, paths["ours"] = start_ours(pace, None, events, ledger=ledger)
    procs.append(ours)
    cpu_pids["ours"] = [ours.pid]
    return Servers(pace, paths, cpu_pids, procs, work)
