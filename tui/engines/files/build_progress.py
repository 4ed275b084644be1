"""The first native build's progress on one line, from the build's own step counter.

``scripts/setup.sh`` pipes ``pip wheel -v`` (which shows the build backend's output) into

    python3 tui/engines/files/build_progress.py LOG LABEL

Every line goes to LOG (the full log, for when the build fails); the terminal gets one
line: the step counter the build prints itself — ninja's ``[n/m]``, or make's ``[ nn%]``
— the time elapsed and the log's path::

    [setup] building llama-cpp-python: step 123/456 (27%) · 3m12s · log: .venv/build-…log

rewritten in place on a terminal, and at most every :data:`QUIET_EVERY_S` seconds (or
each further tenth of the steps) as plain lines when the output is not one (CI logs).
Before the first step the line names the stage (pip's set-up, CMake configuring); after
the last, "linking done, packing the wheel". Stdlib only: it runs under the system
Python before any virtual environment exists.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable
from typing import IO

NINJA_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]\s")  # "[123/456] Building C object ..."
MAKE_PERCENT = re.compile(r"^\s*\[\s*(\d{1,3})%\]\s")  # "[ 42%] Building C object ..."
QUIET_EVERY_S = 60.0
STAGES = (  # (text the build prints, what the line says before the first step)
    ("Installing build dependencies", "installing the build's tools"),
    ("Configuring CMake", "configuring (CMake)"),
    ("-- The C compiler identification", "configuring (CMake)"),
    ("Building project with", "compiling"),
)


def elapsed_text(seconds: float) -> str:
    """ "45s", "3m12s", "1h02m"."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class BuildProgress:
    """The state of one build, fed line by line."""

    def __init__(self, label: str, log_path: str) -> None:
        self.label = label
        self.log_path = log_path
        self.step: int | None = None
        self.total: int | None = None
        self.percent: int | None = None  # make's own percentage (no step count)
        self.stage = "starting"
        self.lines = 0

    def feed(self, line: str) -> bool:
        """Take one line of build output; True when the shown state changed."""
        self.lines += 1
        m = NINJA_STEP.match(line)
        if m:
            step, total = int(m.group(1)), int(m.group(2))
            if 0 < step <= total:
                changed = (step, total) != (self.step, self.total)
                self.step, self.total, self.stage = step, total, "compiling"
                return changed
            return False
        m = MAKE_PERCENT.match(line)
        if m:
            pct = int(m.group(1))
            if 0 <= pct <= 100 and pct != self.percent:
                self.percent, self.stage = pct, "compiling"
                return True
            return False
        for marker, stage in STAGES:
            if marker in line and stage != self.stage and self.step is None:
                self.stage = stage
                return True
        return False

    @property
    def fraction(self) -> float | None:
        if self.step is not None and self.total:
            return self.step / self.total
        if self.percent is not None:
            return self.percent / 100.0
        return None

    def text(self, elapsed_s: float) -> str:
        """The one line (without the "[setup]" prefix)."""
        if self.step is not None and self.total is not None:
            where = f"step {self.step}/{self.total} ({100 * self.step // self.total}%)"
            if self.step == self.total:
                where += ", linking done, packing the wheel"
        elif self.percent is not None:
            where = f"{self.percent}% (make)"
        else:
            where = self.stage
        return f"building {self.label}: {where} · {elapsed_text(elapsed_s)} · log: {self.log_path}"


def follow(
    lines: Iterable[str],
    log: IO[str],
    out: IO[str],
    progress: BuildProgress,
    tty: bool,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Copy ``lines`` to ``log`` and keep ``out`` showing the progress line."""
    t0 = clock()
    last_shown = -1e9
    last_tenth = -1
    prefix = "\033[1m[setup]\033[0m " if tty else "[setup] "
    for line in lines:
        log.write(line)
        changed = progress.feed(line)
        now = clock()
        if tty:
            if changed or now - last_shown >= 1.0:
                out.write("\r\033[K" + prefix + progress.text(now - t0))
                out.flush()
                last_shown = now
            continue
        frac = progress.fraction
        tenth = -1 if frac is None else int(frac * 10)
        if (changed and tenth > last_tenth) or now - last_shown >= QUIET_EVERY_S:
            out.write(prefix + progress.text(now - t0) + "\n")
            out.flush()
            last_shown, last_tenth = now, max(last_tenth, tenth)
    log.flush()
    end = prefix + progress.text(clock() - t0)
    out.write(("\r\033[K" + end + "\n") if tty else (end + "\n"))
    out.flush()


def main(argv: list[str]) -> int:
    """``build_progress.py LOG LABEL`` with the build's output on stdin."""
    if len(argv) != 2:
        print("usage: build_progress.py LOG LABEL  < build output", file=sys.stderr)
        return 2
    log_path, label = argv
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
    with open(log_path, "w", encoding="utf-8") as log:
        follow(stdin, log, sys.stdout, BuildProgress(label, log_path), sys.stdout.isatty())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
