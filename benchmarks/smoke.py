"""Every benchmark's smoke mode (``--smoke``): seconds, not minutes — tiny sizes, one round —
and a check that its workload really happened, so a benchmark that stops working fails the
test command (tests/test_benchmark_smoke.py runs each one's smoke mode).

A smoke run measures nothing worth keeping; its numbers are printed as the full run prints
them. What it cannot run here (a GPU, a peer client or a build the test command does not
install) it says on stderr and, when nothing of the script is left to run, ends with
:data:`SKIPPED` (the test turns that into a loud skip).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

SKIPPED = 77  # the exit status of a smoke run that could not run here (as automake's tests)


def add_flag(ap: argparse.ArgumentParser) -> None:
    """``--smoke`` on a benchmark's parser."""
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="seconds: tiny sizes, one round, and a check that the workload ran",
    )


def check(ok: object, what: str) -> None:
    """End a smoke run with status 1 when its workload did not happen as meant."""
    if not ok:
        print(f"*** SMOKE FAILED: {what}", file=sys.stderr, flush=True)
        raise SystemExit(1)


def skip(why: str) -> NoReturn:
    """End a smoke run that cannot run on this machine (the test skips, loudly)."""
    print(f"*** SMOKE SKIPPED: {why}", file=sys.stderr, flush=True)
    raise SystemExit(SKIPPED)


def left_out(what: str, why: str) -> None:
    """Say that one part of a smoke run is left out here, and why."""
    print(f"*** SMOKE LEAVES OUT {what}: {why}", file=sys.stderr, flush=True)


def passed(what: str) -> None:
    """The smoke run's last line: what it checked."""
    print(f"smoke ok: {what}", flush=True)
