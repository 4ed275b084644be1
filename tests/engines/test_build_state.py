"""The background build's state file (tui/engines/files/build_state.py): what it says
about now, when a build "ran between" two stamps (the disturbed mark's rule), and how a
hostile or broken file is read (never trusted, never fatal)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from tests.support.builds import fake_builder
from tui.engines.files import build_state
from tui.engines.files.build_state import (
    DISTURBED,
    MAX_STATE_BYTES,
    BuildState,
    BuildWatch,
    parse_state,
    read_build_state,
    read_mode,
    write_build_state,
)

S = 1_000_000_000


def state(**kw: object) -> BuildState:
    base = {
        "phase": "compiling",
        "pid": 999_999_999,
        "what": "llama-cpp-python 0.3.36",
        "log": "/v/build-llama-cpp-python.log",
        "started_ns": 100 * S,
        "updated_ns": 130 * S,
        "boot": build_state.boot_id(),
    }
    base.update(kw)
    return BuildState(**base)  # type: ignore[arg-type]


@pytest.fixture
def builder() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that /proc names as a builder (the state's pid must be one)."""
    with fake_builder() as proc:
        yield proc


def test_a_finished_build_ran_exactly_over_its_interval() -> None:
    done = state(phase="done", ended_ns=200 * S)
    assert not done.ran_between(10 * S, 99 * S)  # an answer that ended before it began
    assert done.ran_between(90 * S, 100 * S)  # ... that ended the moment it began
    assert done.ran_between(120 * S, 150 * S)  # inside it
    assert done.ran_between(50 * S, 300 * S)  # around it
    assert done.ran_between(200 * S, 210 * S)  # began the moment it ended
    assert not done.ran_between(201 * S, 210 * S)  # after it
    assert not done.running()


def test_a_running_build_runs_until_now(builder) -> None:  # type: ignore[no-untyped-def]
    now = time.perf_counter_ns()
    live = state(pid=builder.pid, started_ns=now - 5 * S, updated_ns=now)
    assert live.running()
    assert live.ran_between(now - S, now)
    assert live.ran_between(now + S, now + 2 * S)  # it runs still: later answers too
    assert not live.ran_between(now - 10 * S, now - 6 * S)
    assert "step" not in live.describe() and "building llama.cpp for this CPU" in live.describe()
    shown = replace(live, step=40, total=193).describe()
    assert "step 40/193 (20%)" in shown and "log: /v/build-llama-cpp-python.log" in shown


def test_a_builder_that_died_unseen_ran_until_its_last_heartbeat() -> None:
    dead = state(pid=999_999_999)  # no such process
    assert not dead.running()
    assert dead.ran_between(125 * S, 140 * S)
    assert not dead.ran_between(131 * S, 140 * S)
    assert "is gone" in dead.describe()


def test_a_reused_pid_is_not_a_builder() -> None:
    """This test's own process lives, but is no builder: the build is not running."""
    assert not state(pid=os.getpid()).running()


def test_another_boots_build_is_history() -> None:
    old = state(boot="another-boot", phase="done", ended_ns=200 * S)
    if not build_state.boot_id():
        pytest.skip("no boot id on this system")
    assert not old.ran_between(0, 10**18) and not old.running()


def test_the_file_round_trips(tmp_path: Path) -> None:
    s = state(step=3, total=12, stage="compiling", error=None)
    write_build_state(tmp_path, s)
    assert read_build_state(tmp_path) == s
    assert read_build_state(tmp_path / "none") is None
    (tmp_path / "mode").write_text("background\n")
    assert read_mode(tmp_path) == "background"
    (tmp_path / "mode").write_text("sometimes")
    assert read_mode(tmp_path) is None


def test_the_watch_marks_what_ran_beside_an_answer(tmp_path: Path) -> None:
    watch = BuildWatch(tmp_path)
    assert watch.disturbance(0, 10**18) is None  # no build known
    write_build_state(tmp_path, state(phase="failed", ended_ns=200 * S, error="x"))
    assert watch.disturbance(150 * S, 160 * S) == DISTURBED
    assert watch.disturbance(201 * S, 260 * S) is None


GOOD = asdict(state())


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b"{" * 100_000,  # nested too deep
        json.dumps({**GOOD, "schema": 2}).encode(),
        json.dumps({**GOOD, "phase": "rm -rf"}).encode(),
        json.dumps({**GOOD, "pid": "1"}).encode(),
        json.dumps({**GOOD, "pid": True}).encode(),
        json.dumps({**GOOD, "started_ns": -1}).encode(),
        json.dumps({**GOOD, "started_ns": 2**70}).encode(),
        json.dumps({**GOOD, "started_ns": 1.5}).encode(),
        json.dumps({**GOOD, "log": ["a"]}).encode(),
        json.dumps({**GOOD, "step": 5, "total": 3}).encode(),
        json.dumps({**GOOD, "step": 5}).encode(),
        json.dumps({**GOOD, "percent": 101}).encode(),
        json.dumps({k: v for k, v in GOOD.items() if k != "log"}).encode(),
        b'{"schema": 1, "started_ns": 1e999}',
        b'{"schema": 1, "pid": ' + b"9" * 5000 + b"}",
    ],
)
def test_a_broken_or_hostile_file_is_no_state(data: bytes) -> None:
    assert parse_state(data) is None


def test_a_huge_file_is_not_read_whole(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_bytes(b" " * (MAX_STATE_BYTES * 4) + json.dumps(GOOD).encode())
    assert read_build_state(tmp_path) is None


def test_long_texts_are_cut_and_kept_raw_for_the_terminal_filter() -> None:
    s = parse_state(json.dumps({**GOOD, "error": "\x1b[31m" + "x" * 10_000}).encode())
    assert s is not None and s.error is not None
    assert len(s.error) == 2000 and s.error.startswith("\x1b")  # shown via terminal_label


def test_a_link_in_place_of_the_file_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(GOOD))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "state.json").symlink_to(target)
    assert read_build_state(tmp_path / "state") is None
