"""The first build's one-line progress (tui/engines/files/build_progress.py), on recorded
``pip wheel -v`` output of real CMake builds (tests/scripts/recorded/: a 12-step Ninja
build, the same with Make's percentages, and a Ninja build that failed at its last step)."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest

from tui.engines.files.build_progress import BuildProgress, elapsed_text, follow

RECORDED = Path(__file__).resolve().parent / "recorded"


def _lines(name: str) -> list[str]:
    return (RECORDED / name).read_text().splitlines(keepends=True)


def test_ninja_steps_are_counted_in_order() -> None:
    p = BuildProgress("tiny", "build.log")
    seen = []
    for line in _lines("pip-wheel-ninja.log"):
        if p.feed(line) and p.step is not None:
            seen.append((p.step, p.total))
    assert seen == [(n, 12) for n in range(1, 13)]
    assert p.text(192.0) == (
        "building tiny: step 12/12 (100%), linking done, packing the wheel · 3m12s · log: build.log"
    )


def test_stages_before_the_first_step() -> None:
    p = BuildProgress("tiny", "b.log")
    stages = []
    for line in _lines("pip-wheel-ninja.log"):
        p.feed(line)
        if p.step is None and (not stages or stages[-1] != p.stage):
            stages.append(p.stage)
    assert stages == [
        "starting",
        "installing the build's tools",
        "configuring (CMake)",
        "compiling",
    ]


def test_make_percentages() -> None:
    p = BuildProgress("tiny", "b.log")
    pcts = [p.percent for line in _lines("pip-wheel-make.log") if p.feed(line)]
    assert [x for x in pcts if x is not None] == [8, 16, 25, 33, 41, 50, 58, 66, 75, 83, 91, 100]
    assert p.text(5) == "building tiny: 100% (make) · 5s · log: b.log"


def test_a_failed_build_stops_where_it_stopped() -> None:
    p = BuildProgress("tiny", "b.log")
    for line in _lines("pip-wheel-ninja-failed.log"):
        p.feed(line)
    assert (p.step, p.total) == (12, 12)  # its last step ran, and failed


@pytest.mark.parametrize(
    "line", ["[0/0] x", "[5/3] more steps than the total", "[1/2]no space", "  [ 120%] x"]
)
def test_lines_that_are_not_steps(line: str) -> None:
    p = BuildProgress("x", "l")
    assert not p.feed(line) and p.step is None and p.percent is None


def test_follow_on_a_terminal_rewrites_one_line_and_logs_everything() -> None:
    lines = _lines("pip-wheel-ninja.log")
    log, out = io.StringIO(), io.StringIO()
    clock = itertools.count(0.0, 0.5).__next__  # each line half a second later
    follow(lines, log, out, BuildProgress("llama-cpp-python", ".venv/b.log"), True, clock)
    assert log.getvalue() == "".join(lines)
    shown = out.getvalue()
    assert shown.count("\n") == 1  # one line, rewritten with \r, ended once
    last = shown.rsplit("\r\033[K", 1)[-1]
    assert "building llama-cpp-python: step 12/12 (100%)" in last
    assert "log: .venv/b.log" in last


def test_follow_off_a_terminal_prints_a_few_plain_lines() -> None:
    lines = _lines("pip-wheel-ninja.log")
    out = io.StringIO()
    follow(lines, io.StringIO(), out, BuildProgress("x", "l"), False, itertools.count().__next__)
    printed = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\033" not in out.getvalue()
    assert 3 <= len(printed) <= 14 and "step 12/12" in printed[-1]


def test_elapsed_text() -> None:
    assert [elapsed_text(s) for s in (5, 192, 3725)] == ["5s", "3m12s", "1h02m"]
