"""Every benchmark script runs: its smoke mode (``python -m benchmarks.NAME --smoke``: tiny
sizes, one round, and a check that its workload happened, benchmarks/smoke.py) as a
subprocess from the repository root. A benchmark that stops working fails the suite here
instead of rotting until someone next measures with it.

Each script's smoke run takes seconds; the slowest start a real app in tmux or load the
embedded model (docs/testing.md says the total). What a script cannot run on this machine
(a GPU, a peer client the test command does not install) it says, and a script left with
nothing to run exits 77: a loud skip here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.smoke import SKIPPED

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
# Shared parts, not benchmarks (no main of their own).
PARTS = {"__init__", "smoke", "ui_common", "client_common", "proxy_paths", "hostile_proxy"}
# Scripts that start a real engine (the embedded model) or a real server.
ENGINE = {
    "engine_inside_cost",
    "kv_context_growth",
    "overhead_llamacpp",
    "portable_vs_native",
    "ui_llamacpp_worker",
    "watch_cost",
    "worker_age",
}


def scripts() -> list[str]:
    return sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem not in PARTS)


def test_every_script_has_a_smoke_mode() -> None:
    """A new script in benchmarks/ is a benchmark, and comes with ``--smoke``."""
    for name in scripts():
        text = (BENCHMARKS / f"{name}.py").read_text()
        assert re.search(r"__name__ == .__main__.", text), f"{name}: no main"
        assert "smoke.add_flag(" in text or '"--smoke"' in text, f"{name}.py: no --smoke"
    for name in PARTS - {"__init__"}:
        assert (BENCHMARKS / f"{name}.py").is_file(), f"benchmarks/{name}.py is gone"


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.engine] if n in ENGINE else []) for n in scripts()],
)
def test_smoke(name: str, tmp_path: Path) -> None:
    env = dict(os.environ, INFERTOP_CONFIG="", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    if proc.returncode == SKIPPED:
        reason = [ln for ln in out.splitlines() if "SMOKE SKIPPED" in ln]
        pytest.skip(f"*** SKIPPING benchmarks/{name}.py --smoke: {reason[-1:] or out[-300:]}")
    assert proc.returncode == 0, f"benchmarks/{name}.py --smoke ({took:.1f} s):\n{out[-4000:]}"
    assert "smoke ok:" in proc.stdout, out[-2000:]
    print(f"benchmarks/{name}.py --smoke: {took:.1f} s")
