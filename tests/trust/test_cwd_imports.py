"""Row 1: no child process infertop starts runs code from the current folder.

A folder planted with modules that a Python child would import first if the folder were
on its path (``tui/engines/inprocess/worker_main.py``, ``tui/engines/inprocess/probe.py``,
``numpy``, ``llama_cpp``, ``httpx``, ``multiprocessing``); each writes a marker file when
imported.
infertop is started there as its console script starts (tests/trust/conftest.py:
``launcher``) for ``run`` (the default in-process engine: a worker process), ``doctor``
(the engine probe: a child process), ``bench`` (the worker process and the bench's own
spawned worker processes); no marker may appear.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tui.core.child_python import absolute_if_path, child_env, neutral_cwd, python_argv

PLANTED = (
    "tui/__init__.py",
    "tui/engines/__init__.py",
    "tui/engines/inprocess/__init__.py",
    "tui/engines/inprocess/worker_main.py",
    "tui/engines/inprocess/probe.py",
    "numpy/__init__.py",
    "llama_cpp/__init__.py",
    "httpx/__init__.py",
    "multiprocessing/__init__.py",
)


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """(a folder with planted modules, the folder their markers go to)."""
    folder, markers = tmp_path / "clone", tmp_path / "markers"
    markers.mkdir()
    for rel in PLANTED:
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        name = rel.replace("/", ".")
        path.write_text(
            f"open({str(markers / name)!r}, 'w').write('ran')\n"
            "raise ImportError('a planted module ran')\n"
        )
    return folder, markers


def _infertop(launcher: list[str], env: dict[str, str], cwd: Path, *args: str):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [*launcher, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.engine
def test_run_and_doctor_import_nothing_from_the_cwd(planted, launcher, clean_env) -> None:
    folder, markers = planted
    run = _infertop(launcher, clean_env, folder, "run", "--prompt", "hi", "--max-tokens", "2")
    assert run.returncode == 0, run.stderr
    doctor = _infertop(launcher, clean_env, folder, "doctor")
    assert "engine probe" in doctor.stdout or "default engine" in doctor.stdout, doctor.stdout
    assert sorted(p.name for p in markers.iterdir()) == []
    assert "a planted module ran" not in run.stderr + doctor.stdout + doctor.stderr


@pytest.mark.engine
def test_bench_imports_nothing_from_the_cwd(planted, launcher, clean_env, hostile) -> None:
    """The default engine in its worker, then an HTTP engine on two bench worker
    processes (multiprocessing's spawn bootstrap is a ``python -c`` child)."""
    folder, markers = planted
    out = folder.parent / "out"
    common = ["--runs", "1", "--max-tokens", "2", "--warmup", "0", "--prompt-tokens", "8"]
    local = _infertop(launcher, clean_env, folder, "bench", *common, "--out", str(out / "a"))
    assert local.returncode == 0, local.stderr
    remote = _infertop(
        launcher,
        clean_env,
        folder,
        "bench",
        "--url",
        f"{hostile}/ansi",
        "--workers",
        "2",
        "--concurrency",
        "2",
        *common,
        "--out",
        str(out / "b"),
    )
    assert remote.returncode == 0, remote.stderr
    assert sorted(p.name for p in markers.iterdir()) == []


def test_child_argv_env_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}::relative/dir:.")
    env = child_env()
    entries = env["PYTHONPATH"].split(":")
    assert all(Path(p).is_absolute() for p in entries) and str(tmp_path) in entries
    assert env["PYTHONSAFEPATH"] == "1"
    assert python_argv("m", "x")[-3:] == ["-m", "m", "x"] and "-P" in python_argv("m")
    assert neutral_cwd() == "/"
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.chdir(tmp_path)
    assert absolute_if_path("m.gguf") == str(model.resolve())
    assert absolute_if_path("default") == "default"
    assert absolute_if_path("Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"  # a model name


@pytest.mark.engine
def test_the_terminal_ui_imports_nothing_from_the_cwd(planted, launcher, clean_env) -> None:
    """``infertop`` itself, in tmux (a real terminal), until its default engine (the
    worker process) is ready; then Ctrl+Q."""
    import os
    import shlex

    from tests.support.tmux_pane import Tmux

    folder, markers = planted
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in clean_env.items() if k != "TMUX")
    command = f"cd {shlex.quote(str(folder))} && env -i {env} {shlex.join(launcher)}"
    tmux = Tmux(f"infertop-trust-{os.getpid()}")
    tmux("new-session", "-d", "-s", "e2e", "-x", "100", "-y", "30", command + "; sleep 30")
    try:
        screen = tmux.wait(
            lambda s: "A ● local" in s and ("ready" in s or "error" in s), 120, "the engine"
        )
        tmux("send-keys", "-t", "e2e", "C-q")
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
    assert sorted(p.name for p in markers.iterdir()) == []
    assert "ready" in screen, screen
