"""The headless commands and the background build: ``infertop run`` names the llama.cpp
build in its footer and ``--json`` and marks a request a build ran beside; ``infertop
bench`` waits for a build or refuses to measure beside it; ``doctor`` says which build
runs and why. In process (``tui.__main__.main``), the build's state file in a folder of
the test's own (``venv_state_dir`` pointed there), a running build's pid a live process
named as the builder is."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.builds import fake_builder
from tui.__main__ import main
from tui.engines.files import build_state
from tui.engines.files.build_state import BuildState, boot_id, write_build_state

PREBUILT = (
    'default_engine = "prebuilt"\n[engines.prebuilt]\nkind = "llamacpp-prebuilt"\n'
    'model = "default"\nn_threads = 1\n'
)
SYNTH = (
    'default_engine = "s"\n[engines.s]\nkind = "synthetic"\n'
    "options = { tokens_per_s = 400, ttft_ms = 5 }\n"
)


@pytest.fixture
def builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The build state the commands read: this folder."""
    monkeypatch.setattr(build_state, "venv_state_dir", lambda prefix=None: tmp_path / "state")
    monkeypatch.setenv("INFERTOP_STATE", str(tmp_path / "ui-state.toml"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "state"


@pytest.fixture
def builder() -> Iterator[subprocess.Popen[bytes]]:
    with fake_builder() as proc:
        yield proc


def compiling(pid: int) -> BuildState:
    now = time.perf_counter_ns()
    return BuildState(
        "compiling", pid, "llama-cpp-python 0.3.36", "/v/build.log", now, now, boot=boot_id(),
        step=7, total=193,
    )  # fmt: skip


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.engine
def test_run_names_the_build_and_marks_a_request_a_build_ran_beside(
    tmp_path, builds, builder, capsys
) -> None:  # type: ignore[no-untyped-def]
    cfg = config(tmp_path, PREBUILT)
    argv = ["--config", cfg, "run", "--prompt", "Hi", "--max-tokens", "4"]
    assert main([*argv, "--json"]) == 0
    quiet = json.loads(capsys.readouterr().out)
    assert quiet["kind"] == "llamacpp-prebuilt" and quiet["disturbed"] is None
    assert quiet["build"] == "llama.cpp prebuilt (generic x86-64 AVX2)"
    write_build_state(builds, compiling(builder.pid))
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["disturbed"] == "a build was compiling"
    assert main(argv) == 0
    footer = capsys.readouterr().out
    assert "── prebuilt · llamacpp-prebuilt (llama.cpp prebuilt (generic x86-64 AVX2)) · " in footer
    assert "disturbed: a build was compiling while this request ran" in footer


def test_bench_refuses_beside_a_build_when_told(tmp_path, builds, builder, capsys) -> None:  # type: ignore[no-untyped-def]
    write_build_state(builds, compiling(builder.pid))
    out = tmp_path / "report"
    code = main(
        ["--config", config(tmp_path, SYNTH), "bench", "--runs", "1", "--warmup", "0",
         "--max-tokens", "4", "--while-building", "refuse", "--out", str(out)]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "does not measure beside a compile" in err
    assert "step 7/193" in err and not (out / "report.json").exists()


def test_bench_waits_for_the_build_to_end_then_measures(tmp_path, builds, builder, capsys) -> None:  # type: ignore[no-untyped-def]
    state = compiling(builder.pid)
    write_build_state(builds, state)
    ended_at: list[int] = []

    def end_it() -> None:
        time.sleep(2.5)
        builder.kill()
        ended_at.append(time.time())
        write_build_state(builds, replace(state, phase="done", ended_ns=time.perf_counter_ns()))

    threading.Thread(target=end_it).start()
    out = tmp_path / "report"
    code = main(
        ["--config", config(tmp_path, SYNTH), "bench", "--runs", "2", "--warmup", "0",
         "--max-tokens", "4", "--out", str(out)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "waiting for the build to end before measuring" in err
    report = json.loads((out / "report.json").read_text())
    assert report["disturbed"] is None  # it measured after the build, not beside it
    started = datetime.fromisoformat(report["started_at"]).timestamp()
    # the bench's clock started once the build had ended (started_at is to the second; a
    # bench that had not waited would have started 2.5 s before the end)
    assert started >= ended_at[0] - 1


def test_doctor_says_which_build_runs_and_why(
    tmp_path, builds, builder, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from tui.cli import doctor_engine
    from tui.engines.inprocess import llama_builds

    monkeypatch.setenv("INFERTOP_CONFIG", "")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    # a fresh install: only the prebuilt llama.cpp yet, the build for this CPU compiling
    only_prebuilt = lambda: frozenset({"prebuilt"})  # noqa: E731
    monkeypatch.setattr(llama_builds, "installed_builds", only_prebuilt)
    monkeypatch.setattr(doctor_engine, "installed_builds", only_prebuilt)
    write_build_state(builds, compiling(builder.pid))
    main(["doctor", "--no-load"])
    out = capsys.readouterr().out
    (embedded,) = [ln for ln in out.splitlines() if "embedded engine" in ln]
    assert "prebuilt: llama.cpp prebuilt (generic x86-64 AVX2) — building llama.cpp" in embedded
    assert "step 7/193" in embedded and "log: /v/build.log" in embedded
    (tuned,) = [ln for ln in out.splitlines() if "] llama-cpp-python" in ln]
    assert "not installed: building llama.cpp for this CPU" in tuned
    # told never to build
    builder.kill()
    builder.wait()
    (builds / "state.json").unlink()
    (builds / "mode").write_text("never\n")
    main(["doctor", "--no-load"])
    out = capsys.readouterr().out
    assert "INFERTOP_BUILD=never" in next(ln for ln in out.splitlines() if "embedded engine" in ln)
    # named in config
    main(["--config", config(tmp_path, PREBUILT), "doctor", "--no-load"])
    out = capsys.readouterr().out
    assert "config names it" in next(ln for ln in out.splitlines() if "embedded engine" in ln)
