"""The background build of llama.cpp for this CPU (tui/engines/files/tuned_build.py).

The builder runs for real (its own process, nice 19, the state file, the log), with a
stand-in venv python whose ``pip wheel`` prints a recorded ``pip wheel -v`` of a real
CMake/Ninja build (tests/scripts/recorded/) instead of compiling llama.cpp for ten
minutes, as tests/scripts/test_setup_portable.py does for setup.sh. The last test is a
real ``pip wheel`` of llama-cpp-python with a broken compiler first on PATH: the build
really fails, and the state says why in one line (the tests of the app with that state:
tests/app/test_build_follow.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.builds import broken_build_env, builder_command, real_venv, stop_builds
from tui.core.child_python import child_env
from tui.engines.files.build_state import BuildState, read_build_state, venv_state_dir

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "scripts" / "recorded"

FAKE_PYTHON = """#!{python}
import os, sys, time
from pathlib import Path
args = [a for a in sys.argv[1:] if a not in ("-P", "--disable-pip-version-check")]
if args[:2] == ["-m", "tui.engines.files.tuned_build"]:  # the builder itself: the real one
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(" ".join(args) + " | CMAKE_ARGS=" + os.environ.get("CMAKE_ARGS", "") + "\\n")
if args[:2] == ["-m", "pip"]:
    rest = args[2:]
    if rest[0] == "wheel":
        hold = os.environ.get("FAKE_HOLD")
        while hold and not Path(hold).exists():
            time.sleep(0.05)
        out = rest[rest.index("-w") + 1]
        name, ver = next(a for a in rest if "==" in a).split("==")
        for line in Path(os.environ["FAKE_BUILD_OUTPUT"]).read_text().splitlines(True):
            sys.stdout.write(line)
        if os.environ.get("FAKE_BUILD_FAILS"):
            sys.exit(1)
        Path(out, name.replace("-", "_") + "-" + ver + "-py3-none-linux_x86_64.whl").write_text("")
        sys.exit(0)
    sys.exit(0)  # install, uninstall
if args[:2] == ["-m", "tui.engines.inprocess.probe"]:
    if os.environ.get("FAKE_PROBE_FAILS"):
        print("engine probe FAILED: llama.cpp built for this CPU died of SIGILL", file=sys.stderr)
        sys.exit(1)
    print("engine probe: ok")
    sys.exit(0)
sys.exit(3)
"""


def _venv(tmp: Path) -> Path:
    venv = tmp / "venv"
    py = venv / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text(FAKE_PYTHON.format(python=sys.executable))
    py.chmod(0o755)
    return venv


def _env(tmp: Path, recording: str = "pip-wheel-ninja.log", **extra: str) -> dict[str, str]:
    env = child_env()
    env.update(FAKE_CALLS=str(tmp / "calls.log"), FAKE_BUILD_OUTPUT=str(RECORDED / recording))
    env.pop("INFERTOP_TUNED_WHEELS", None)
    env.update(extra)
    return env


def _builder(command: str, venv: Path, wheels: Path, env: dict[str, str], *more: str) -> list[str]:
    return builder_command(command, venv, wheels, *more)


def _run(tmp: Path, **extra: str) -> tuple[int, BuildState, list[str]]:
    venv, wheels = _venv(tmp), tmp / "wheels"
    env = _env(tmp, **extra)
    done = subprocess.run(_builder("run", venv, wheels, env), env=env, timeout=120, check=False)
    state = read_build_state(venv_state_dir(str(venv)))
    assert state is not None
    calls = (tmp / "calls.log").read_text().splitlines()
    return done.returncode, state, calls


def test_a_build_compiles_installs_proves_and_joins_the_wheelhouse(tmp_path: Path) -> None:
    code, state, calls = _run(tmp_path)
    assert code == 0 and state.phase == "done", state
    assert (state.step, state.total) == (12, 12)  # the build's own step counter, read
    assert state.ended_ns is not None and state.started_ns < state.ended_ns
    assert "nice 19" in state.priority
    wheel = tmp_path / "wheels" / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    assert state.wheel == str(wheel) and wheel.exists()
    assert [p.name for p in (tmp_path / "wheels").iterdir()] == [wheel.name]  # no leftovers
    log = Path(state.log).read_text()
    assert (RECORDED / "pip-wheel-ninja.log").read_text() in log
    assert "engine probe: ok" in log
    compile_call, *rest = calls
    assert " wheel -v --no-deps --no-cache-dir -w " in compile_call
    assert compile_call.endswith(
        "llama-cpp-python==0.3.36 | CMAKE_ARGS=-DGGML_NATIVE=OFF -DGGML_AVX2=ON"
    )
    assert "--no-index" not in compile_call
    assert "install --no-deps --force-reinstall" in rest[0] and rest[1].startswith("-m pip install")
    assert rest[2].startswith("-m tui.engines.inprocess.probe")
    assert "built in" in state.describe()


def test_a_failed_compile_says_where_and_why_and_keeps_no_wheel(tmp_path: Path) -> None:
    code, state, calls = _run(
        tmp_path, recording="pip-wheel-ninja-failed.log", FAKE_BUILD_FAILS="1"
    )
    assert code == 1 and state.phase == "failed"
    assert state.error is not None and "collect2: error: ld returned 1 exit status" in state.error
    assert state.error.startswith("while step ")
    assert not any(p.suffix == ".whl" for p in (tmp_path / "wheels").rglob("*"))
    assert len(calls) == 1  # nothing installed, nothing probed
    assert "failed after" in state.describe() and state.log in state.describe()


def test_a_build_that_does_not_run_here_is_taken_out_again(tmp_path: Path) -> None:
    code, state, calls = _run(tmp_path, FAKE_PROBE_FAILS="1")
    assert code == 1 and state.phase == "failed"
    assert state.error is not None and "does not run on this machine" in state.error
    assert "SIGILL" in state.error
    assert calls[-1].startswith("-m pip uninstall -y llama-cpp-python")
    assert not any(p.suffix == ".whl" for p in (tmp_path / "wheels").rglob("*"))


def test_a_shared_wheelhouse_is_taken_instead_of_compiling(tmp_path: Path) -> None:
    code, state, calls = _run(tmp_path, INFERTOP_TUNED_WHEELS="http://127.0.0.1:9/wheels/")
    assert code == 0, state
    assert "--no-index --find-links http://127.0.0.1:9/wheels/" in calls[0]


def _wait(pred, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("condition not met")


def test_start_detaches_runs_once_and_stops_on_sigterm(tmp_path: Path) -> None:
    venv, wheels = _venv(tmp_path), tmp_path / "wheels"
    env = _env(tmp_path, FAKE_HOLD=str(tmp_path / "go"))
    start = _builder("start", venv, wheels, env)
    first = subprocess.run(start, env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and "in the background" in first.stdout
    state_dir = venv_state_dir(str(venv))
    # start returns once the builder wrote its state: an app started next follows it
    written = read_build_state(state_dir)
    assert written is not None and written.running() and str(written.pid) in first.stdout
    running = _wait(lambda: (s := read_build_state(state_dir)) and s.running() and s)
    assert running.phase in ("starting", "compiling")
    assert os.getpgid(running.pid) == running.pid  # a session of its own: outlives the terminal
    again = subprocess.run(start, env=env, capture_output=True, text=True, timeout=60)
    assert "is being built" in again.stdout
    os.kill(running.pid, signal.SIGTERM)
    stopped = _wait(lambda: (s := read_build_state(state_dir)) and s.phase == "failed" and s)
    assert stopped.error == "stopped by SIGTERM" and stopped.ended_ns is not None
    _wait(lambda: not stopped.running())
    # a failed build is not started again unless asked
    third = subprocess.run(start, env=env, capture_output=True, text=True, timeout=60)
    assert "failed" in third.stdout and "--build=background" in third.stdout
    assert read_build_state(state_dir) == stopped
    (tmp_path / "go").touch()
    retry = subprocess.run([*start, "--retry-failed"], env=env, capture_output=True, text=True)
    assert "in the background" in retry.stdout
    done = _wait(lambda: (s := read_build_state(state_dir)) and s.phase == "done" and s)
    assert done.pid != running.pid


def fail_a_real_build(tmp: Path) -> BuildState:
    """A real ``pip wheel llama-cpp-python`` with a broken compiler first on PATH."""
    venv = real_venv(tmp)
    env = broken_build_env(tmp)
    subprocess.run(builder_command("run", venv, tmp / "wheels"), env=env, timeout=600, check=False)
    state = read_build_state(venv_state_dir(str(venv)))
    assert state is not None
    return state


def test_a_broken_compiler_fails_the_build_with_one_clear_line(tmp_path: Path) -> None:
    state = fail_a_real_build(tmp_path)
    assert state.phase == "failed", state
    assert state.error is not None
    assert "CMake Error" in state.error and "is not able to compile" in state.error, state.error
    assert str(tmp_path / "broken-bin") in state.error  # names the compiler it tried
    assert "broken compiler (test)" in Path(state.log).read_text()
    assert not (tmp_path / "wheels").exists() or not any((tmp_path / "wheels").rglob("*.whl"))


@pytest.fixture(autouse=True)
def _no_builders_left(tmp_path: Path):  # type: ignore[no-untyped-def]
    yield
    stop_builds(tmp_path)
