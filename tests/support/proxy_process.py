"""``infertop proxy`` as its own process, for tests that restart or kill it: started with
the real command line, its URL read from the line it announces, its stderr kept in a
file (tests grep it), stopped by its PID (SIGTERM, or SIGKILL on purpose)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ANNOUNCE = "infertop proxy listening on "


@dataclass
class ProxyProcess:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self, kill: bool = False, timeout: float = 20.0) -> int:
        """SIGTERM (a clean end: its ledger flushed) or SIGKILL; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)


def start_proxy_process(
    upstream: str, env: dict[str, str], log: Path, *args: str, timeout_s: float = 60.0
) -> ProxyProcess:
    """``python -m tui [global args] proxy --upstream URL --listen 127.0.0.1:0 ...``;
    ``args`` before ``proxy`` when they start with ``--config``."""
    pre: list[str] = []
    rest = list(args)
    if rest[:1] == ["--config"]:
        pre, rest = rest[:2], rest[2:]
    cmd = [sys.executable, "-m", "tui", *pre, "proxy", "--upstream", upstream]
    cmd += ["--listen", "127.0.0.1:0", *rest]
    err = log.open("ab")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
    err.close()
    found: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith(ANNOUNCE):
                found.append(line[len(ANNOUNCE) :])
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout_s
    while not found and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not found:
        proc.kill()
        proc.wait(5)
        raise RuntimeError(f"the proxy did not start: {log.read_text(errors='replace')[-2000:]}")
    return ProxyProcess(proc, found[0], log)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
