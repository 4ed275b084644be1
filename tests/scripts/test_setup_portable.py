"""scripts/setup.sh on a userland like macOS's: no md5sum, no nproc, no GNU long options.

The script runs for real (bash, the real ggml_build.py and build_progress.py) in a copy of
the files it needs, with a PATH holding only POSIX tools behind shims that refuse any
option POSIX does not define for them, and a stand-in ``.venv/bin/python`` whose ``pip
wheel`` prints a recorded ``pip wheel -v`` of a real CMake/Ninja build
(tests/scripts/recorded/) instead of compiling llama.cpp for ten minutes. What is not
checked here: a real bash 3.2 (tests/scripts/test_bash32.py checks the constructs) and a
real Mac (none here; README says so).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tui.engines.files.ggml_build import build_key, cpu_count

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).resolve().parent / "recorded"
BASH = shutil.which("bash") or "/bin/bash"

# POSIX tools setup.sh may use, and the options POSIX gives each (anything else — a GNU
# long option, a GNU-only flag — makes the shim fail the run)
ALLOWED = {
    "cat": "",
    "dirname": "",
    "mkdir": "p",
    "ls": "1adl",
    "tail": "n",
    "grep": "qEF",
}

SHIM = """#!/bin/sh
for a in "$@"; do
  case "$a" in
    --) break ;;
    --*) echo "NOT POSIX: $0 $a" >&2; exit 97 ;;
    -[0-9]*) ;;
    -*) opts=$(printf %s "${{a#-}}" | tr -d '{allowed}')
        case "$opts" in ''|[0-9]*) ;; *) echo "NOT POSIX: $0 $a" >&2; exit 97 ;; esac ;;
  esac
done
exec {real} "$@"
"""

FAKE_PYTHON = """#!{python}
import os, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(" ".join(args) + " | jobs=" + os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "") + "\\n")
if args[:2] == ["-m", "pip"]:
    rest = [a for a in args[2:] if a != "--disable-pip-version-check"]
    if rest[0] == "wheel":
        out, (name, ver) = rest[rest.index("-w") + 1], rest[-1].split("==")
        sys.stdout.write(Path(os.environ["FAKE_BUILD_OUTPUT"]).read_text())
        if os.environ.get("FAKE_BUILD_FAILS"):
            sys.exit(1)
        Path(out, name.replace("-", "_") + "-" + ver + "-cp3-none-any.whl").write_text("")
        sys.exit(0)
    if rest[0] == "install":
        if "-e" in rest:
            Path(".venv/installed").touch()
        sys.exit(0)
if args[:2] == ["-m", "tui.engines.inprocess.probe"]:
    print("engine probe: ok")
    sys.exit(0)
if args[:3] == ["-m", "tui.engines.files.tuned_build", "start"]:
    print("building llama.cpp for this CPU in the background (fake)")
    sys.exit(0)
if args[:1] == ["-c"]:
    sys.exit(0 if Path(".venv/installed").exists() else 1)
sys.exit(3)
"""


def _checkout(tmp: Path) -> Path:
    """The files setup.sh reads, a stand-in venv python, and a PATH of POSIX shims."""
    repo = tmp / "repo"
    for rel in (
        "scripts/setup.sh",
        "tui/engines/files/ggml_build.py",
        "tui/engines/files/build_progress.py",
        "pyproject.toml",
    ):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, repo / rel)
    py = repo / ".venv" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text(FAKE_PYTHON.format(python=sys.executable))
    py.chmod(0o755)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for tool, opts in ALLOWED.items():
        real = shutil.which(tool)
        assert real, tool
        shim = bin_dir / tool
        shim.write_text(SHIM.format(allowed=opts or "\\n", real=real))
        shim.chmod(0o755)
    # the shims' own needs, not setup's: tr (and sh, which runs them by absolute path)
    os.symlink(shutil.which("tr") or "/usr/bin/tr", bin_dir / "tr")
    return repo


def _run(
    repo: Path, tmp: Path, recording: str, fails: bool = False, *args: str
) -> subprocess.CompletedProcess:
    env = {
        "PATH": str(tmp / "bin"),
        "HOME": str(tmp),
        "PYTHON": sys.executable,
        "INFERTOP_CACHE": str(tmp / "cache"),
        "FAKE_CALLS": str(tmp / "calls.log"),
        "FAKE_BUILD_OUTPUT": str(RECORDED / recording),
        "LANG": "C",
    }
    if fails:
        env["FAKE_BUILD_FAILS"] = "1"
    return subprocess.run(
        [BASH, str(repo / "scripts" / "setup.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_path_has_no_gnu_only_tools(tmp_path: Path) -> None:
    _checkout(tmp_path)
    names = {p.name for p in (tmp_path / "bin").iterdir()}
    assert not names & {"md5sum", "nproc", "sha256sum", "cut", "readlink", "sed", "timeout"}
    bad = subprocess.run([str(tmp_path / "bin" / "ls"), "--color=never"], capture_output=True)
    assert bad.returncode == 97  # the shim refuses GNU options: the check can fail


def test_setup_runs_builds_with_progress_and_probes(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    proc = _run(repo, tmp_path, "pip-wheel-ninja.log", False, "--build=now")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT POSIX" not in proc.stderr
    out = proc.stdout
    assert "building llama-cpp-python 0.3.36 from source" in out
    # one progress line from the build's own step counter, its time and the log's path
    assert "building llama-cpp-python: step 12/12 (100%)" in out
    assert "log: .venv/build-llama-cpp-python.log" in out
    log = repo / ".venv" / "build-llama-cpp-python.log"
    assert log.read_text() == (RECORDED / "pip-wheel-ninja.log").read_text()
    assert out.rstrip().endswith("ready: .venv/bin/infertop")
    # the wheelhouse key and the CPU count came from Python, as ggml_build computes them
    args = subprocess.run(
        [sys.executable, str(ROOT / "tui/engines/files/ggml_build.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    wheels = tmp_path / "cache" / f"wheels-{build_key('ggml-portable-1 ' + args)}"
    assert [p.name for p in wheels.iterdir()] == ["llama_cpp_python-0.3.36-cp3-none-any.whl"]
    calls = (tmp_path / "calls.log").read_text().splitlines()
    wheel_call = next(c for c in calls if " wheel " in c)
    assert wheel_call.endswith(f"| jobs={cpu_count()}") and " -v " in wheel_call
    probe = next(i for i, c in enumerate(calls) if c.startswith("-m tui.engines.inprocess.probe"))
    assert any("--force-reinstall" in c for c in calls[:probe])
    assert (repo / ".venv" / ".infertop-setup").exists()
    # a second run finds everything in place: no build, no pip — whatever the mode
    again = _run(repo, tmp_path, "pip-wheel-ninja.log")
    assert again.returncode == 0 and "environment up to date" in again.stdout
    assert "building" not in again.stdout


def test_a_failed_build_shows_the_end_of_its_log(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    proc = _run(repo, tmp_path, "pip-wheel-ninja-failed.log", True, "--build=now")
    assert proc.returncode == 1
    assert "building llama-cpp-python failed (full log: .venv/build-llama-cpp-python.log)" in (
        proc.stderr
    )
    assert "undefined reference to `main'" in proc.stderr  # the log's tail, shown
    assert not (repo / ".venv" / ".infertop-setup").exists()


@pytest.mark.parametrize("recording", ["pip-wheel-make.log"])
def test_make_builds_show_their_percentage(tmp_path: Path, recording: str) -> None:
    repo = _checkout(tmp_path)
    proc = _run(repo, tmp_path, recording, False, "--build=now")
    assert proc.returncode == 0, proc.stderr
    assert "building llama-cpp-python: 100% (make)" in proc.stdout


def test_by_default_the_prebuilt_answers_while_the_build_runs_in_the_background(
    tmp_path: Path,
) -> None:
    """`bash scripts/run.sh`'s setup: no compile before ready; the prebuilt llama.cpp is
    probed; the build for this CPU is started in the background with the CMake options
    and job count the foreground build would get; the mode is written for doctor."""
    repo = _checkout(tmp_path)
    proc = _run(repo, tmp_path, "pip-wheel-ninja.log")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT POSIX" not in proc.stderr
    assert "from source" not in proc.stdout  # nothing compiled in the foreground
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert not any(" wheel " in c for c in calls)
    installs = [c for c in calls if " install " in c]
    assert not any("--force-reinstall" in c for c in installs)  # no native wheel to install
    assert any("-e ." in c and "tuned" not in c for c in installs)
    probe = next(c for c in calls if c.startswith("-m tui.engines.inprocess.probe"))
    assert "--build=prebuilt" in probe
    (start,) = [c for c in calls if c.startswith("-m tui.engines.files.tuned_build start")]
    args = subprocess.run(
        [sys.executable, str(ROOT / "tui/engines/files/ggml_build.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert f"--cmake-args={args} " in start and f"--jobs {cpu_count()}" in start
    assert "--retry-failed" not in start  # a build that failed is retried only when asked
    assert calls.index(probe) < calls.index(start)  # the prebuilt runs before the build starts
    assert "building llama.cpp for this CPU in the background" in proc.stdout
    assert (repo / ".venv" / "infertop-build" / "mode").read_text().strip() == "background"
    # asked for by name: a failed build is tried again
    (tmp_path / "calls.log").write_text("")
    again = _run(repo, tmp_path, "pip-wheel-ninja.log", False, "--build=background")
    assert again.returncode == 0 and "environment up to date" in again.stdout
    (start,) = [ln for ln in (tmp_path / "calls.log").read_text().splitlines() if "start" in ln]
    assert "--retry-failed" in start


def test_never_builds_nothing_and_starts_nothing(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    proc = _run(repo, tmp_path, "pip-wheel-ninja.log", False, "--build=never")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (tmp_path / "calls.log").read_text()
    assert " wheel " not in calls and "tuned_build" not in calls
    assert (repo / ".venv" / "infertop-build" / "mode").read_text().strip() == "never"


def test_a_bad_mode_is_refused(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    proc = _run(repo, tmp_path, "pip-wheel-ninja.log", False, "--build=sometimes")
    assert proc.returncode == 2 and "must be now, background or never" in proc.stderr
