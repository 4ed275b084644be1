"""The TUI while llama.cpp compiles for this CPU in the background (tui/app/screens/chat_build.py).

The app starts as a fresh install does: only the prebuilt llama.cpp (the built-in engine
``prebuilt``). The build is its state file, written here as the builder writes it, with
a live process named as the builder as its pid (the builder itself is tested in
tests/engines/test_tuned_build.py, a real one end to end in tests/e2e/test_fresh_clone.py);
the failing build is a real one: a broken compiler first on PATH.
Real engines answer: the prebuilt llama.cpp, then llama.cpp built for this CPU.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.app.app_support import SIZE, gen, submit, summary, turns
from tests.support.builds import fake_builder, start_broken_build, stop_builds
from tui.app.widgets.engine_bar import EngineBar
from tui.engines.files.build_state import (
    BuildState,
    BuildWatch,
    boot_id,
    write_build_state,
)

pytestmark = pytest.mark.engine

PREBUILT_ONLY = (
    'default_engine = "prebuilt"\n'
    + gen(6)
    + '[engines.prebuilt]\nkind = "llamacpp-prebuilt"\nmodel = "default"\nn_threads = 1\n'
)
PREBUILT_LABEL = "llama.cpp prebuilt (generic x86-64 AVX2)"
TUNED_LABEL = "llama.cpp built for this CPU"


@pytest.fixture
def builder() -> Iterator[subprocess.Popen[bytes]]:
    with fake_builder() as proc:
        yield proc


def compiling(pid: int, log: Path, step: int) -> BuildState:
    now = time.perf_counter_ns()
    return BuildState(
        phase="compiling",
        pid=pid,
        what="llama-cpp-python 0.3.36",
        log=str(log),
        started_ns=now - 60 * 10**9,
        updated_ns=now,
        boot=boot_id(),
        step=step,
        total=193,
        stage="compiling",
        priority="nice 19, ionice idle",
    )


def ended(state: BuildState, phase: str, error: str | None = None) -> BuildState:
    now = time.perf_counter_ns()
    return replace(state, phase=phase, ended_ns=now, updated_ns=now, error=error)  # type: ignore[arg-type]


def line(app) -> str:  # type: ignore[no-untyped-def]
    widget = app.chat.query_one("#build-line")
    return str(widget.render()) if widget.display else ""


def bar(app) -> str:  # type: ignore[no-untyped-def]
    return app.chat.query_one(EngineBar).plain()


async def test_the_build_shows_marks_and_hands_over_to_the_tuned_engine(
    make_config, build_app, wait_for, notes, tmp_path, builder
) -> None:  # type: ignore[no-untyped-def]
    states = tmp_path / "venv" / "infertop-build"
    log = tmp_path / "venv" / "build-llama-cpp-python.log"
    state = compiling(builder.pid, log, 40)
    write_build_state(states, state)
    app = build_app(make_config(PREBUILT_ONLY), build_watch=BuildWatch(states))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in bar(app))
        assert PREBUILT_LABEL in bar(app)
        shown = line(app)
        assert "building llama.cpp for this CPU: step 40/193 (20%)" in shown, shown
        assert f"log: {log}" in shown and "the prebuilt llama.cpp answers meanwhile" in shown
        # the build's progress moves on the line, read from its state
        write_build_state(states, replace(state, step=120, updated_ns=time.perf_counter_ns()))
        await wait_for(pilot, lambda: "step 120/193" in line(app), 10)
        # an answer while it compiles carries the mark
        await submit(pilot, "Name a colour.")
        await wait_for(pilot, lambda: turns(app) and turns(app)[-1].finished)
        assert "disturbed: a build was compiling" in summary(turns(app)[-1])
        # the build ends: said, and the next prompt runs on the tuned engine
        builder.kill()
        write_build_state(states, ended(state, "done"))
        await wait_for(pilot, lambda: app.core.slot_engine["A"] == "local", 10)
        await wait_for(pilot, lambda: "was built" in " ".join(notes(app)), 30)
        said = " ".join(notes(app))
        assert "llama.cpp for this CPU was built" in said and "the next prompt runs on it" in said
        assert list(app.config.engines) == ["local", "prebuilt"]  # the prebuilt stays: A/B
        await wait_for(pilot, lambda: "ready" in bar(app) and TUNED_LABEL in bar(app))
        assert line(app) == ""
        await submit(pilot, "Name a colour.")
        await wait_for(pilot, lambda: len(turns(app)) == 2 and turns(app)[-1].finished)
        assert "disturbed" not in summary(turns(app)[-1])
    records = [json.loads(ln) for ln in (tmp_path / "session.jsonl").read_text().splitlines()]
    assert [(r["engine"], r["kind"], r["build"], r["disturbed"]) for r in records] == [
        ("prebuilt", "llamacpp-prebuilt", PREBUILT_LABEL, "a build was compiling"),
        ("local", "llamacpp", TUNED_LABEL, None),
    ]


async def test_a_failed_build_says_why_and_the_prebuilt_keeps_answering(
    make_config, build_app, wait_for, notes, tmp_path, request
) -> None:  # type: ignore[no-untyped-def]
    """A real background build (tui/engines/files/tuned_build.py) that fails: a broken
    compiler first on PATH, llama-cpp-python's CMake check the place it stops."""
    venv = start_broken_build(tmp_path)
    request.addfinalizer(lambda: stop_builds(tmp_path))
    states = venv / "infertop-build"
    app = build_app(make_config(PREBUILT_ONLY), build_watch=BuildWatch(states))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in bar(app))
        failed = "building llama.cpp for this CPU failed"
        await wait_for(pilot, lambda: failed in line(app), 300)
        # a notification is a message the app handles after the line is drawn
        await wait_for(pilot, lambda: failed in " ".join(notes(app)), 30)
        said = " ".join(notes(app))
        why = 'CMake Error: The C compiler "' + str(tmp_path / "broken-bin")
        assert failed in said and why in said, said
        assert f"log: {venv / 'build-llama-cpp-python.log'}" in said
        assert "the prebuilt llama.cpp stays" in said
        assert why in line(app)
        assert app.core.slot_engine["A"] == "prebuilt" and list(app.config.engines) == ["prebuilt"]
        await submit(pilot, "Name a colour.")
        await wait_for(pilot, lambda: turns(app) and turns(app)[-1].finished)
        done = summary(turns(app)[-1])
        assert "TTFT" in done and "ERROR" not in done
        assert PREBUILT_LABEL in bar(app)
