"""``infertop bench`` never measures beside a compile: while the background build of
llama.cpp for this CPU runs (tui/engines/files/tuned_build.py), a bench waits for it to
end (``--while-building wait``, the default) or refuses to start (``refuse``), as the
user says. A compile at nice 19 still takes cache, memory bandwidth and a core's turns
from the engine being measured, and its share changes by the second: numbers measured
beside it would not compare with any other run. A build that starts while a bench runs
(``scripts/setup.sh`` in another terminal) marks the report (``disturbed``)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Literal

from tui.bench.report.shape import BenchReport
from tui.core.safe_text import terminal_label
from tui.engines.files.build_state import BuildWatch

WhileBuilding = Literal["wait", "refuse"]
WAIT_POLL_S = 1.0
SAY_EVERY_S = 30.0


def add_build_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--while-building",
        choices=("wait", "refuse"),
        default="wait",
        help="while llama.cpp compiles for this CPU in the background: wait for it to end "
        "before measuring (default), or refuse to start (exit status 2)",
    )


class BuildRunning(Exception):
    """A build runs and the bench was told to refuse; the message says which."""


def wait_for_build(
    watch: BuildWatch,
    how: WhileBuilding,
    *,
    poll_s: float = WAIT_POLL_S,
    say_every_s: float = SAY_EVERY_S,
) -> float:
    """Return once no build runs (seconds waited); BuildRunning for ``refuse``. Progress
    goes to stderr: at once, then every ``say_every_s``."""
    state = watch.state()
    if state is None or not state.running():
        return 0.0
    if how == "refuse":
        raise BuildRunning(
            f"{state.describe()}; a bench does not measure beside a compile "
            "(--while-building wait waits for it to end)"
        )
    t0 = time.monotonic()
    said = -say_every_s
    while state is not None and state.running():
        now = time.monotonic()
        if now - said >= say_every_s:
            print(
                "infertop bench: waiting for the build to end before measuring: "
                + terminal_label(state.describe(), 2000),
                file=sys.stderr,
                flush=True,
            )
            said = now
        time.sleep(poll_s)
        state = watch.state()
    if state is not None:
        print(f"infertop bench: {terminal_label(state.describe(), 2000)}", file=sys.stderr)
    return time.monotonic() - t0


class BuildMark:
    """The build that ran while a bench measured, if any: ``mark`` sets the report's
    ``disturbed`` from :meth:`start` to then, and says it on stdout."""

    def __init__(self, watch: BuildWatch) -> None:
        self.watch = watch
        self.t0_ns = time.perf_counter_ns()

    def start(self) -> None:
        self.t0_ns = time.perf_counter_ns()

    def mark(self, report: BenchReport) -> None:
        report["disturbed"] = self.watch.disturbance(self.t0_ns, time.perf_counter_ns())

    @staticmethod
    def say(report: BenchReport) -> None:
        if report.get("disturbed"):
            print(f"warning: disturbed: {report.get('disturbed')} while the bench measured")


def gate(how: WhileBuilding) -> BuildMark:
    """Before a bench: wait for a running build to end, or refuse (BuildRunning); a
    KeyboardInterrupt while waiting goes through. The mark for its report."""
    watch = BuildWatch()
    wait_for_build(watch, how)
    return BuildMark(watch)
