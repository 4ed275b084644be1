"""Whether a loop is linear, told in one run on any machine: no bound in seconds.

A bound in seconds holds on the machine it was measured on: CI's runner was five times
slower than this one on a loop that takes 0.18 s here, and a test that fails there for
it fails for nothing. What a quadratic loop does on every machine is cost more per step
the more steps came before it. So the loop's steps are split into equal segments, each
timed in this thread's CPU time with the cyclic collector off (a collection costs what
the whole test session holds, not what the loop does), and the last segment is compared
with the first: a linear loop keeps them alike, a loop whose step grows with what came
before makes the k-th segment cost about 2k − 1 times the first.

A quadratic loop stops at the first segment that passes the bound, so a regression fails
in about the time of a few segments, not of the whole loop.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

GROWTH = 4.0  # a segment may cost this many times the first: linear ~1, quadratic 2k-1
SLACK_S = 0.05  # and this much more: a scheduler tick, a page fault burst
CHECK_EVERY = 1000  # steps between looks at the clock


@contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off for the block, back on after it."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def segment_costs(
    steps: int, step: Callable[[int], object], segments: int = 6, growth: float = GROWTH
) -> list[float]:
    """``step(i)`` for i in range(steps); the thread CPU seconds of each of ``segments``
    equal parts. Raises AssertionError, naming the step, as soon as a segment costs more
    than ``growth`` × the first + SLACK_S."""
    size = steps // segments
    costs: list[float] = []
    with collector_off():
        for k in range(segments):
            start = time.thread_time()
            limit = growth * costs[0] + SLACK_S if costs else None
            for i in range(k * size, steps if k == segments - 1 else (k + 1) * size):
                step(i)
                if limit is not None and i % CHECK_EVERY == 0:
                    spent = time.thread_time() - start
                    assert spent <= limit, (
                        f"step {i}: segment {k + 1} of {segments} already costs "
                        f"{spent:.3f} s, the first {costs[0]:.3f} s: not linear"
                    )
            costs.append(time.thread_time() - start)
    assert costs[-1] <= growth * costs[0] + SLACK_S, f"segment costs {costs}: not linear"
    return costs


def size_ratio(run: Callable[[int], object], small: int, scale: int = 10, tries: int = 3) -> float:
    """The thread CPU time of ``run(small * scale)`` ÷ that of ``run(small)``, each the
    least of ``tries`` runs with the collector off: about ``scale`` for a linear run,
    ``scale``² for a quadratic one."""

    def least(n: int) -> float:
        best = float("inf")
        with collector_off():
            for _ in range(tries):
                start = time.thread_time()
                run(n)
                best = min(best, time.thread_time() - start)
        return max(best, 1e-6)

    return least(small * scale) / least(small)
