"""The background build of llama.cpp for this CPU, while the prebuilt llama.cpp answers.

``scripts/setup.sh`` starts it (``INFERTOP_BUILD=background``, what ``bash scripts/run.sh``
does when the wheelhouse holds no build for this CPU yet)::

    .venv/bin/python -m tui.engines.files.tuned_build start --venv .venv --wheels DIR \\
        --dist llama-cpp-python --version 0.3.36 --cmake-args "-DGGML_NATIVE=OFF ..."

``start`` returns at once. The build runs in a process of its own session (it outlives
the terminal and the app, which only read its state file: tui/engines/files/build_state.py),
at nice 19 and, where ``ionice`` exists, in the idle I/O class; the compiler processes
inherit both, so the engine being measured gets the CPU first. Its steps:

1. **compiling**: ``pip wheel -v --no-deps --no-cache-dir`` into a private folder beside
   the wheelhouse, with ``CMAKE_ARGS``; every line to the log (``VENV/build-DIST.log``),
   the build's own step counter (ninja's ``[n/m]``, read by
   tui/engines/files/build_progress.py) to the state file.
   ``INFERTOP_TUNED_WHEELS=DIR-or-URL`` takes the wheel from that wheelhouse instead
   (``pip --no-index --find-links``: a team's shared wheelhouse, a CI cache) — the
   end-to-end test uses it, so the suite never compiles llama.cpp twice;
2. **installing**: ``pip install --no-deps --force-reinstall WHEEL`` into the venv;
3. **probing**: the engine probe (tui/engines/inprocess/probe.py: import, model load and
   one token, in a child process). A build that does not run here is taken out again
   (uninstalled, its wheel not kept): the app never meets it;
4. **done**: the wheel joins the wheelhouse (setup.sh finds it there from then on) and the
   app's next prompt runs on it — or **failed**, with one line saying why, and the log.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from tui.engines.files.build_progress import BuildProgress
from tui.engines.files.build_state import (
    BUILDER_MODULE,
    HEARTBEAT_S,
    BuildState,
    Phase,
    boot_id,
    read_build_state,
    updated,
    venv_state_dir,
    write_build_state,
)

SOURCE_ENV = "INFERTOP_TUNED_WHEELS"
PROBE_TIMEOUT_S = 600.0
FIRST_STATE_S = 30.0  # `start` waits this long at most for the builder's first state
SAFE_PATH_FLAG = ["-P"] if sys.version_info >= (3, 11) else []
# what a failed build's log says first, in the order they are looked for
_FAILURE_LINES = (
    re.compile(r".*\b(fatal )?error: .*"),
    re.compile(r"ERROR: .*"),
)


class BuildFailed(Exception):
    """The build cannot go on; the message is the one line the user reads."""


class StateWriter:
    """The build's state, rewritten on each change and every :data:`HEARTBEAT_S`."""

    def __init__(self, state_dir: Path, state: BuildState) -> None:
        self.state_dir = state_dir
        self.state = state
        self._lock = threading.Lock()
        self._stop = threading.Event()
        write_build_state(state_dir, state)
        self._beat = threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True)
        self._beat.start()

    def set(self, **changes: Any) -> None:
        with self._lock:
            self.state = updated(self.state, **changes)
            write_build_state(self.state_dir, self.state)

    def finish(self, phase: Phase, **changes: Any) -> None:
        self._stop.set()
        self.set(phase=phase, ended_ns=time.perf_counter_ns(), **changes)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.set()


def lower_priority() -> str:
    """This process (and every process it starts) at the lowest CPU priority, and in the
    idle I/O class where ``ionice`` exists; says what it got."""
    got = []
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 19)
        got.append("nice 19")
    except (AttributeError, OSError):
        pass
    ionice = shutil.which("ionice")
    if ionice is not None:
        for args, name in ((["-c", "3"], "ionice idle"), (["-c", "2", "-n", "7"], "ionice 7")):
            done = subprocess.run(
                [ionice, *args, "-p", str(os.getpid())], capture_output=True, check=False
            )
            if done.returncode == 0:
                got.append(name)
                break
    return ", ".join(got) or "normal priority (it could not be lowered)"


def failure_reason(lines: Iterable[str], stage: str) -> str:
    """One line: where the build was and the first error its log's tail names (a CMake
    error with its message, a compiler's ``error:``, pip's ``ERROR:``)."""
    tail = [ln.rstrip() for ln in lines]
    for i, line in enumerate(tail):
        if "CMake Error" in line:
            said: list[str] = []  # its message, to the end of its first sentence
            for more in tail[i + 1 : i + 12]:
                if more.strip():
                    said.append(more.strip())
                if said and said[-1].endswith("."):
                    break
            head = re.sub(r"CMake Error at \S+ \(\w+\):", "CMake Error:", line.strip())
            return f"while {stage}: {' '.join([head, *said])[:300]}"
    shown = [ln.strip() for ln in tail if ln.strip()]
    for pattern in _FAILURE_LINES:
        for line in shown:
            m = pattern.search(line)
            if m:
                return f"while {stage}: {m.group(0)[:300]}"
    return f"while {stage}: {shown[-1][:300] if shown else 'no output'}"


def _pip_env(cmake_args: str, jobs: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env["CMAKE_ARGS"] = cmake_args
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    return env


def compile_wheel(args: argparse.Namespace, into: Path, log: IO[str], writer: StateWriter) -> Path:
    """pip builds the wheel into ``into``; the step counter goes to the state."""
    python = venv_python(args.venv)
    cmd = [python, *SAFE_PATH_FLAG, "-m", "pip", "--disable-pip-version-check", "wheel"]
    cmd += ["-v", "--no-deps", "--no-cache-dir", "-w", str(into), f"{args.dist}=={args.version}"]
    source = os.environ.get(SOURCE_ENV)
    if source:
        cmd += ["--no-index", "--find-links", source]
        writer.set(stage=f"taking the built wheel from {source}")
    log.write(f"$ {' '.join(cmd)}\nCMAKE_ARGS={args.cmake_args}\n")
    writer.set(phase="compiling")
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_pip_env(args.cmake_args, args.jobs),
        cwd=str(into),
    )
    _CHILDREN.append(proc)
    progress = BuildProgress(args.dist, str(writer.state.log))
    tail: collections.deque[str] = collections.deque(maxlen=200)
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", errors="replace")
        log.write(line)
        tail.append(line)
        if progress.feed(line):
            writer.set(
                step=progress.step,
                total=progress.total,
                percent=progress.percent,
                stage=progress.stage,
            )
    log.flush()
    if proc.wait() != 0:
        raise BuildFailed(failure_reason(tail, writer.state.progress()))
    norm = args.dist.replace("-", "_")
    built = sorted(into.glob(f"{norm}-{args.version}-*.whl"))
    if not built:
        raise BuildFailed(f"pip finished but made no {norm}-{args.version} wheel")
    return built[0]


def _run_logged(cmd: list[str], log: IO[str], env: dict[str, str], timeout: float) -> str:
    """Run ``cmd`` with its output appended to the log; its last line when it fails."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    try:
        done = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            cwd=os.path.abspath(os.sep),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout:.0f} s"
    out = (done.stdout + done.stderr).decode("utf-8", errors="replace")
    log.write(out)
    log.flush()
    if done.returncode == 0:
        return ""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    said = [ln for ln in lines if "FAILED" in ln or ln.startswith("ERROR")]
    return (said or lines or [f"exit status {done.returncode}"])[0][:300]


def install_and_probe(
    args: argparse.Namespace, wheel: Path, log: IO[str], writer: StateWriter
) -> None:
    """Install the wheel into the venv and prove it runs there; undo the install if not."""
    python = venv_python(args.venv)
    pip = [python, *SAFE_PATH_FLAG, "-m", "pip", "--disable-pip-version-check"]
    env = _pip_env(args.cmake_args, args.jobs)
    writer.set(phase="installing")
    # this wheel in place of any other build of the same version, then what it needs
    why = _run_logged(
        [*pip, "install", "--no-deps", "--force-reinstall", str(wheel)], log, env, 600
    )
    why = why or _run_logged([*pip, "install", str(wheel)], log, env, 600)
    if why:
        raise BuildFailed(f"built, but installing it failed: {why}")
    writer.set(phase="probing")
    probe_env = dict(env, PYTHONSAFEPATH="1")
    probe = [python, *SAFE_PATH_FLAG, "-m", "tui.engines.inprocess.probe"]
    why = _run_logged(probe, log, probe_env, PROBE_TIMEOUT_S)
    if why:
        _run_logged([*pip, "uninstall", "-y", args.dist], log, env, 120)
        raise BuildFailed(f"built, but it does not run on this machine: {why}")


def venv_python(venv: str) -> str:
    return str(Path(venv).absolute() / "bin" / "python")


_CHILDREN: list[subprocess.Popen[bytes]] = []


def _on_term(signum: int, frame: Any) -> None:
    for child in _CHILDREN:
        if child.poll() is None:
            child.terminate()
    raise BuildFailed(f"stopped by {signal.Signals(signum).name}")


def run_build(args: argparse.Namespace) -> int:
    """The build itself (the detached process ``start`` made)."""
    priority = lower_priority()
    venv = Path(args.venv).absolute()
    wheels = Path(args.wheels).absolute()
    state_dir = venv_state_dir(str(venv))
    log_path = venv / f"build-{args.dist}.log"
    now = time.perf_counter_ns()
    state = BuildState(
        phase="starting",
        pid=os.getpid(),
        what=f"{args.dist} {args.version}",
        log=str(log_path),
        started_ns=now,
        updated_ns=now,
        boot=boot_id(),
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        priority=priority,
    )
    writer = StateWriter(state_dir, state)
    signal.signal(signal.SIGTERM, _on_term)
    workdir = wheels / f".building-{os.getpid()}"
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w", encoding="utf-8", errors="replace") as log:
            log.write(f"infertop: building {state.what} for this CPU ({priority})\n")
            wheel = compile_wheel(args, workdir, log, writer)
            install_and_probe(args, wheel, log, writer)
            kept = wheels / wheel.name
            os.replace(wheel, kept)
        writer.finish("done", wheel=str(kept))
        return 0
    except BuildFailed as e:
        writer.finish("failed", error=str(e))
        return 1
    except Exception as e:  # noqa: BLE001 - whatever it was, the state must say it ended
        writer.finish("failed", error=f"the builder failed: {type(e).__name__}: {e}")
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def start_build(args: argparse.Namespace) -> int:
    """Start the build in a session of its own, unless one runs for this venv already."""
    state_dir = venv_state_dir(str(Path(args.venv).absolute()))
    current = read_build_state(state_dir)
    if current is not None and current.running():
        print(f"llama.cpp for this CPU is being built: {current.describe()}")
        return 0
    if current is not None and current.phase == "failed" and not args.retry_failed:
        print(current.describe())
        print(
            "the prebuilt llama.cpp stays; try again with --build=background "
            "(INFERTOP_BUILD=background), or compile in the foreground with --build=now"
        )
        return 0
    state_dir.mkdir(parents=True, exist_ok=True)
    argv = [venv_python(args.venv), *SAFE_PATH_FLAG, "-m", BUILDER_MODULE, "run"]
    argv += [f"--{k.replace('_', '-')}={v}" for k, v in _build_args(args).items()]
    env = dict(os.environ, PYTHONSAFEPATH="1")
    with open(state_dir / "builder-stderr.log", "ab") as err:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env=env,
            cwd=os.path.abspath(os.sep),
        )
    _await_first_state(state_dir, proc)
    log = Path(args.venv) / f"build-{args.dist}.log"
    print(f"building llama.cpp for this CPU in the background (process {proc.pid}, nice 19)")
    print(f"the prebuilt llama.cpp answers meanwhile; the app switches when ready; log: {log}")
    return 0


def _await_first_state(state_dir: Path, proc: subprocess.Popen[bytes]) -> None:
    """Return once the builder wrote its first state (or ended, or after
    :data:`FIRST_STATE_S`): whoever starts next (the TUI) finds the build it follows."""
    deadline = time.monotonic() + FIRST_STATE_S
    while time.monotonic() < deadline and proc.poll() is None:
        state = read_build_state(state_dir)
        if state is not None and state.pid == proc.pid:
            return
        time.sleep(0.05)


def _build_args(args: argparse.Namespace) -> dict[str, str]:
    return {
        "venv": str(Path(args.venv).absolute()),
        "wheels": str(Path(args.wheels).absolute()),
        "dist": args.dist,
        "version": args.version,
        "cmake_args": args.cmake_args,
        "jobs": str(args.jobs),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m tui.engines.files.tuned_build",
        description="Build llama.cpp for this CPU in the background (see the module doc).",
    )
    p.add_argument("command", choices=("start", "run"))
    p.add_argument("--venv", required=True, help="the virtual environment to install into")
    p.add_argument("--wheels", required=True, help="the wheelhouse the built wheel joins")
    p.add_argument("--dist", default="llama-cpp-python")
    p.add_argument("--version", default="0.3.36")
    p.add_argument("--cmake-args", default="", help="CMAKE_ARGS for the build")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--retry-failed", action="store_true", help="start even if the last failed")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return start_build(args) if args.command == "start" else run_build(args)


if __name__ == "__main__":
    sys.exit(main())
