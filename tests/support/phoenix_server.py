"""Start a real OTLP receiver — Arize Phoenix, in its own venv — on free loopback ports,
and read the spans it stored back through its REST API.

The venv is made by scripts/setup-phoenix.sh (the test command runs it; cached). Phoenix
runs as a plain child process with its working folder (its SQLite database) in a
temporary folder, offline, and is stopped by its PID.

INFERTOP_PHOENIX_PYTHON   the venv's python (default ~/.cache/infertop/venv-phoenix)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.real_servers import CACHE, free_port, unavailable


def phoenix_python() -> Path:
    return Path(
        os.environ.get("INFERTOP_PHOENIX_PYTHON", CACHE / "venv-phoenix" / "bin" / "python")
    )


@dataclass
class Phoenix:
    proc: subprocess.Popen[bytes]
    url: str  # http://127.0.0.1:PORT: OTLP/HTTP at /v1/traces, the REST API under /v1
    log: Path
    started_s: float = 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def spans(self, project: str = "default", limit: int = 1000) -> list[dict[str, Any]]:
        """Every span of ``project`` Phoenix stored (its REST API, page by page)."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            q = {"limit": str(min(limit, 1000))}
            if cursor:
                q["cursor"] = cursor
            url = f"{self.url}/v1/projects/{project}/spans?{urllib.parse.urlencode(q)}"
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    body = json.loads(r.read())
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return out  # no span yet: the project is made by the first one
                raise
            out += body.get("data", [])
            cursor = body.get("next_cursor")
            if not cursor or len(out) >= limit:
                return out

    def wait_spans(
        self, match: Any, n: int = 1, timeout_s: float = 30.0, project: str = "default"
    ) -> list[dict[str, Any]]:
        """Wait until ``n`` spans for which ``match(span)`` holds are stored."""
        deadline = time.monotonic() + timeout_s
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found = [s for s in self.spans(project) if match(s)]
            if len(found) >= n:
                return found
            time.sleep(0.3)
        raise AssertionError(f"{len(found)} of {n} spans in Phoenix after {timeout_s} s")


def start_phoenix(workdir: Path, timeout_s: float = 180) -> Phoenix:
    """Phoenix serving on a free loopback port, its data under ``workdir``; skip (or fail
    under INFERTOP_REQUIRE_SERVERS=1) when its venv is missing."""
    py = phoenix_python()
    phoenix = py.parent / "phoenix"
    if not phoenix.is_file():
        unavailable("Arize Phoenix", f"venv missing ({py}): run scripts/setup-phoenix.sh")
    workdir.mkdir(parents=True, exist_ok=True)
    port, grpc = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    env.update(
        PHOENIX_WORKING_DIR=str(workdir),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(grpc),
        PHOENIX_TELEMETRY_ENABLED="false",
        DO_NOT_TRACK="1",
    )
    log = workdir / "phoenix.log"
    with log.open("wb") as f:
        proc = subprocess.Popen(
            [str(phoenix), "serve"],
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=workdir,
        )
    p = Phoenix(proc, f"http://127.0.0.1:{port}", log)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"phoenix exited ({proc.returncode}):\n{p.log_tail()}")
        try:
            with urllib.request.urlopen(p.url + "/healthz", timeout=1) as r:
                if r.status == 200:
                    p.started_s = time.monotonic() - t0
                    return p
        except OSError:
            pass
        time.sleep(0.3)
    p.stop()
    raise RuntimeError(f"phoenix not ready after {timeout_s:.0f} s:\n{p.log_tail()}")


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    """A Phoenix span's attributes, flat (``gen_ai.usage.input_tokens``: 12): its REST API
    gives them flat already in some versions and nested in others."""
    raw = span.get("attributes") or {}
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            flat[prefix] = value

    walk("", raw)
    return flat
