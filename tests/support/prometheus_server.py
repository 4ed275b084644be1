"""Start a real Prometheus (Debian's 2.42 binary) on a free loopback port.

A plain process with a temporary config and data folder (RECIPES.md: "Remote and fleet
parts"); the config is written as JSON, which is YAML. Stopped by its PID. Also starts
Debian's node_exporter the same way.

INFERTOP_PROMETHEUS      the prometheus binary (default: ``prometheus`` on PATH)
INFERTOP_NODE_EXPORTER   the node_exporter binary (default: ``prometheus-node-exporter``)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prometheus_binary() -> str | None:
    return os.environ.get("INFERTOP_PROMETHEUS") or shutil.which("prometheus")


def node_exporter_binary() -> str | None:
    return os.environ.get("INFERTOP_NODE_EXPORTER") or shutil.which("prometheus-node-exporter")


def require_binaries(node_exporter: bool = True) -> None:
    """Prometheus (and node_exporter) are real servers like llama-server and vLLM: when
    missing, skip loudly, or fail under INFERTOP_REQUIRE_SERVERS=1 (the test command
    installs them: scripts/setup-e2e.sh)."""
    from tests.support.real_servers import unavailable

    if prometheus_binary() is None:
        unavailable("prometheus", "not installed (apt-get install prometheus)")
    if node_exporter and node_exporter_binary() is None:
        unavailable("node_exporter", "not installed (apt-get install prometheus-node-exporter)")


@dataclass
class Job:
    """A scrape job: ``targets`` are ``host:port``; ``labels`` per target (same order)
    may set ``instance`` (Prometheus then shows that instead of the address)."""

    name: str
    targets: list[str]
    labels: list[dict[str, str]] | None = None
    metrics_path: str | None = None  # default /metrics (an infertop proxy: /infertop/metrics)

    def config(self, interval: str) -> dict[str, Any]:
        if self.labels is None:
            static: list[dict[str, Any]] = [{"targets": self.targets}]
        else:
            static = [{"targets": [t], "labels": lab} for t, lab in zip(self.targets, self.labels)]
        job: dict[str, Any] = {
            "job_name": self.name,
            "scrape_interval": interval,
            "static_configs": static,
        }
        if self.metrics_path:
            job["metrics_path"] = self.metrics_path
        return job


@dataclass
class Process:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    started_s: float = 0.0
    workdir: Path = field(default_factory=Path)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


def _wait(p: Process, path: str, timeout_s: float) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if p.proc.poll() is not None:
            raise RuntimeError(f"{p.name} exited ({p.proc.returncode}):\n{p.log_tail()}")
        try:
            with urllib.request.urlopen(p.url + path, timeout=1) as r:
                if r.status == 200:
                    p.started_s = time.monotonic() - t0
                    return
        except OSError:
            pass
        time.sleep(0.1)
    p.stop()
    raise RuntimeError(f"{p.name} not ready after {timeout_s:.0f} s:\n{p.log_tail()}")


def start_prometheus(
    jobs: list[Job], workdir: Path, interval: str = "1s", timeout_s: float = 30
) -> Process:
    """Prometheus scraping ``jobs`` every ``interval``; ready when /-/ready answers."""
    binary = prometheus_binary()
    if binary is None:
        raise RuntimeError("prometheus not found (apt-get install prometheus)")
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    body = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [j.config(interval) for j in jobs],
    }
    config.write_text(json.dumps(body, indent=1))
    port = free_port()
    log = workdir / "prometheus.log"
    cmd = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=2h",
        "--log.level=warn",
    ]
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    p = Process("prometheus", proc, f"http://127.0.0.1:{port}", log, workdir=workdir)
    _wait(p, "/-/ready", timeout_s)
    return p


def start_node_exporter(workdir: Path, timeout_s: float = 15) -> Process:
    """node_exporter with only the cpu and meminfo collectors (what the fleet reads)."""
    binary = node_exporter_binary()
    if binary is None:
        raise RuntimeError("node_exporter not found (apt-get install prometheus-node-exporter)")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / "node_exporter.log"
    cmd = [
        binary,
        f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults",
        "--collector.cpu",
        "--collector.meminfo",
    ]
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    p = Process("node_exporter", proc, f"http://127.0.0.1:{port}", log, workdir=workdir)
    _wait(p, "/metrics", timeout_s)
    return p


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def wait_targets_up(prom_url: str, n: int, timeout_s: float = 30) -> list[dict[str, Any]]:
    """Wait until ``n`` targets are up; returns the active targets."""
    deadline = time.monotonic() + timeout_s
    targets: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        targets = get_json(prom_url + "/api/v1/targets?state=active")["data"]["activeTargets"]
        if sum(1 for t in targets if t["health"] == "up") >= n:
            return targets
        time.sleep(0.2)
    up = sum(1 for t in targets if t["health"] == "up")
    raise AssertionError(f"{up} of {n} targets up after {timeout_s} s")


def query(prom_url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's result vector."""
    q = urllib.parse.urlencode({"query": promql})
    return list(get_json(f"{prom_url}/api/v1/query?{q}")["data"]["result"])


def wait_scrapes(prom_url: str, n: int, window_s: float, timeout_s: float = 60) -> None:
    """Wait until every target has ``n`` scrapes inside the last ``window_s`` (what a
    rate over that window needs), rather than sleeping for the scrapes that ought to
    have happened: a busy machine scrapes late."""
    promql = f"min(count_over_time(up[{max(1, round(window_s))}s]))"
    deadline = time.monotonic() + timeout_s
    seen = 0.0
    while time.monotonic() < deadline:
        result = query(prom_url, promql)
        seen = float(result[0]["value"][1]) if result else 0.0
        if seen >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"{seen:.0f} of {n} scrapes per target after {timeout_s} s")


def wait_until(prom_url: str, promql: str, timeout_s: float = 60) -> list[dict[str, Any]]:
    """Wait until instant query ``promql`` returns something (a filter that holds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = query(prom_url, promql)
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"no result for {promql!r} after {timeout_s} s")
