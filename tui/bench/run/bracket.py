"""The bracketing search behind ``--find-capacity``, free of any engine: which rate to
probe next, and what the probes so far say the capacity is.

A probe at rate r *passes* when its SLO attainment is at or above the target. The
search assumes attainment falls as the rate rises, and:

1. **brackets**: from the start rate, doubles after a pass until a probe fails, or
   halves after a fail until one passes (giving up below ``min_rate``, or above
   ``max_rate`` where the capacity is then "at least" the highest pass);
2. **bisects** geometrically: the next rate is √(lo·hi), where lo is the highest passing
   rate and hi the lowest failing rate above it, until hi/lo ≤ 1 + ``rel_tol``. A
   concurrency search (``integer``) bisects whole numbers, ⌊(lo + hi)/2⌋, until
   hi − lo = 1.

The capacity is lo, and the interval is [lo, hi): the true capacity under this
workload lies at or above the highest rate measured to pass and below the lowest rate
measured to fail. Each probe's attainment is itself a sample, so the interval holds
only as far as each probe's verdict does: a probe whose attainment's Wilson interval
straddles the target is marked ``close``, and a fail measured below a pass
(non-monotone, noise) is reported, not hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class ProbeResult:
    """One probe: its rate, how many requests were judged and how many were good."""

    rate: float
    good: int
    judged: int
    target: float
    stop_reason: str | None = None  # stopped early: its verdict was already decided
    low: float | None = None  # the attainment's 95 % Wilson interval
    high: float | None = None
    label: str = ""
    wall_s: float | None = None

    @property
    def attainment(self) -> float | None:
        return self.good / self.judged if self.judged else None

    @property
    def passed(self) -> bool:
        a = self.attainment
        return a is not None and a >= self.target and self.stop_reason is None

    @property
    def close(self) -> bool:
        """The verdict is within the probe's own noise (its interval holds the target)."""
        return (
            self.low is not None and self.high is not None and self.low <= self.target <= self.high
        )

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.update(attainment=self.attainment, passed=self.passed, close=self.close)
        return d


@dataclass(frozen=True)
class SearchBounds:
    start_rate: float
    min_rate: float = 0.01
    max_rate: float = 1000.0
    rel_tol: float = 0.15  # stop when hi / lo <= 1 + rel_tol
    integer: bool = False  # a concurrency search: whole numbers, done when hi − lo = 1


def bracket(probes: list[ProbeResult]) -> tuple[float | None, float | None]:
    """(lo, hi): the highest passing rate, and the lowest failing rate above it (each None
    when there is none)."""
    passes = [p.rate for p in probes if p.passed]
    lo = max(passes) if passes else None
    fails = [p.rate for p in probes if not p.passed and (lo is None or p.rate > lo)]
    return lo, (min(fails) if fails else None)


def next_rate(probes: list[ProbeResult], bounds: SearchBounds) -> float | None:
    """The next rate to probe, or None when the search is done."""
    if not probes:
        return bounds.start_rate
    lo, hi = bracket(probes)
    if lo is None:
        assert hi is not None
        r = float(hi // 2) if bounds.integer else hi / 2
        return r if r >= bounds.min_rate else None
    if hi is None:
        r = lo * 2
        return r if r <= bounds.max_rate else None
    if bounds.integer:
        return None if hi - lo <= 1 else float((lo + hi) // 2)
    if hi / lo <= 1 + bounds.rel_tol:
        return None
    r = math.sqrt(lo * hi)
    tried = {p.rate for p in probes}
    return None if r in tried else r


def capacity_result(
    probes: list[ProbeResult], bounds: SearchBounds, why_done: str, unit: str = "req/s"
) -> dict[str, Any]:
    """The search's answer: the capacity (lo), its interval [lo, hi), every probe taken
    in order, and notes on what limits the answer."""
    lo, hi = bracket(probes)
    notes: list[str] = []
    if lo is None:
        notes.append(
            f"no probe met the target: the capacity is below {hi:g} {unit}"
            if hi is not None
            else "no probe ran"
        )
    elif hi is None:
        notes.append(f"every probe met the target: the capacity is at least {lo:g} {unit}")
    inverted = [p.rate for p in probes if not p.passed and lo is not None and p.rate < lo]
    if inverted:
        rates = ", ".join(f"{r:g}" for r in sorted(inverted))
        notes.append(
            f"non-monotone: probes at {rates} {unit} failed below the highest pass ({lo:g}): "
            "the verdicts near the capacity are within the noise of the probes"
        )
    close = [p.rate for p in probes if p.close]
    if close:
        notes.append(
            "probes whose attainment interval holds the target (a verdict within noise): "
            + ", ".join(f"{r:g}" for r in close)
        )
    return {
        "capacity": lo,
        "unit": unit,
        "interval": [lo, hi],
        "target": probes[0].target if probes else None,
        "probes": [p.to_dict() for p in probes],
        "done_because": why_done,
        "rel_tol": bounds.rel_tol,
        "notes": notes,
    }
