"""Real builds of llama.cpp for this CPU that fail on purpose, for the tests of the
background builder (tests/engines/test_tuned_build.py) and of the TUI beside it
(tests/app/test_build_follow.py): a broken compiler first on PATH, and a venv folder whose
python is this test run's, so the builder's ``pip wheel llama-cpp-python`` runs for real
and fails where a user's would (CMake's compiler check)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tui.core.child_python import child_env
from tui.engines.files.build_state import BUILDER_MODULE, read_build_state

BROKEN_CC = '#!/bin/sh\necho "broken compiler (test): $0 refuses to compile" >&2\nexit 1\n'


def broken_compilers(bin_dir: Path) -> Path:
    """``cc``, ``gcc``, ``c++``, ``g++``, ``clang``, ``clang++`` that fail, in ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("cc", "gcc", "c++", "g++", "clang", "clang++"):
        (bin_dir / name).write_text(BROKEN_CC)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def real_venv(tmp: Path) -> Path:
    """A venv folder whose python is this test run's (pip and all) behind a wrapper."""
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    wrapper = venv / "bin" / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return venv


def broken_build_env(tmp: Path) -> dict[str, str]:
    """A child's environment with the broken compilers first on PATH (no CC/CXX, and no
    shared wheelhouse to take a built wheel from instead of compiling)."""
    env = child_env()
    env["PATH"] = f"{broken_compilers(tmp / 'broken-bin')}{os.pathsep}{env['PATH']}"
    for var in ("CC", "CXX", "INFERTOP_TUNED_WHEELS"):
        env.pop(var, None)
    return env


def builder_command(command: str, venv: Path, wheels: Path, *more: str) -> list[str]:
    """``python -m tui.engines.files.tuned_build COMMAND`` for ``venv`` and ``wheels``."""
    return [
        sys.executable,
        "-m",
        "tui.engines.files.tuned_build",
        command,
        f"--venv={venv}",
        f"--wheels={wheels}",
        "--cmake-args=-DGGML_NATIVE=OFF -DGGML_AVX2=ON",
        "--jobs=2",
        *more,
    ]


def start_broken_build(tmp: Path) -> Path:
    """Start a real background build that will fail (broken compiler); its venv."""
    venv = real_venv(tmp)
    cmd = builder_command("start", venv, tmp / "wheels")
    subprocess.run(cmd, env=broken_build_env(tmp), check=True, capture_output=True, timeout=60)
    return venv


def stop_builds(tmp: Path) -> None:
    """Kill the process group of any builder still running for a venv under ``tmp``."""
    for state_dir in tmp.glob("venv/infertop-build"):
        state = read_build_state(state_dir)
        if state is not None and state.running():
            os.killpg(state.pid, signal.SIGKILL)


@contextmanager
def fake_builder() -> Iterator[subprocess.Popen[bytes]]:
    """A live process whose command line names the builder module: what a running build
    looks like to those who read its state (a sleeper, not a compile); killed at the end."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", BUILDER_MODULE],
        stdin=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
