"""Arrival processes for open-loop levels: when each request of a level is sent.

A process of rate R (requests/s) is a seeded sequence of send offsets t_1 < t_2 < ...
(seconds from the level's start; there is a gap before the first arrival too):

- ``constant``: every gap is exactly 1/R (inter-arrival CV 0).
- ``poisson``: gaps exponential with mean 1/R (CV 1). Drawn as ``expovariate(R)``, so a
  plain ``--rate`` level sends at the same times as before this module existed.
- ``gamma``: gaps Gamma(shape k, scale 1/(k·R)) with k = ``burstiness``: mean 1/R and
  CV = 1/√k. k = 1 is Poisson; k < 1 is burstier (clumps of arrivals and long silences,
  vLLM's ``--burstiness``); k > 1 is smoother, towards constant.

**Ramp-up** over T_r seconds: the rate rises linearly from 0 to R over [0, T_r], then
stays at R. It is a change of time, so the shape of the gaps (their CV) is kept: the
gaps above are drawn at the full rate in *operational* time τ, and an arrival at τ is
sent at t = √(2·T_r·τ) while τ ≤ T_r/2, else at t = τ + T_r/2 (so the expected number of
arrivals by t is ∫₀ᵗ λ(s) ds with λ(s) = R·min(1, s/T_r)).

**Limits**: a level ends its arrivals after ``count`` requests or ``duration_s`` seconds,
whichever comes first (at least one of them is set).

What was generated is checked against what was asked with :func:`arrival_stats`, for
the schedule itself and for the times requests were really sent.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any, Literal

ArrivalProcess = Literal["constant", "poisson", "gamma"]
PROCESSES: tuple[ArrivalProcess, ...] = ("constant", "poisson", "gamma")
MAX_ARRIVALS = 1_000_000  # a schedule longer than this is refused (memory, not time)


class ArrivalError(ValueError):
    """An arrival process that cannot be generated (the message names the parameter)."""


@dataclass(frozen=True)
class ArrivalSpec:
    """One open-loop level's arrivals: process, rate, shape, ramp and limits, and seed."""

    process: str = "poisson"
    rate: float = 1.0
    burstiness: float = 1.0  # gamma shape k (1 = Poisson); ignored by the other processes
    ramp_s: float = 0.0
    duration_s: float | None = None
    count: int | None = None
    seed: int = 0

    def kind(self) -> ArrivalProcess:
        """The process, checked to be one of :data:`PROCESSES` (ArrivalError if not)."""
        for known in PROCESSES:
            if self.process == known:
                return known
        raise ArrivalError(f"arrival process {self.process!r}: one of {', '.join(PROCESSES)}")

    def validate(self) -> None:
        self.kind()
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ArrivalError(f"--rate must be a positive number of requests/s ({self.rate})")
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            raise ArrivalError(f"--burstiness must be a positive number ({self.burstiness})")
        if not (self.ramp_s >= 0 and math.isfinite(self.ramp_s)):
            raise ArrivalError(f"--ramp-up must be 0 or more seconds ({self.ramp_s})")
        if self.duration_s is not None and not (
            self.duration_s > 0 and math.isfinite(self.duration_s)
        ):
            raise ArrivalError(
                f"--duration must be a positive number of seconds ({self.duration_s})"
            )
        if self.count is not None and self.count < 1:
            raise ArrivalError(f"the request count must be at least 1 ({self.count})")
        if self.count is None and self.duration_s is None:
            raise ArrivalError("an arrival process needs a request count or a duration")
        expected = self.count if self.count is not None else self.rate * (self.duration_s or 0)
        if expected > MAX_ARRIVALS:
            raise ArrivalError(
                f"{expected:.0f} arrivals asked (rate × duration): at most {MAX_ARRIVALS}"
            )

    @property
    def asked_cv(self) -> float:
        """The inter-arrival CV the process has by construction (after the ramp)."""
        if self.process == "constant":
            return 0.0
        if self.process == "poisson":
            return 1.0
        return 1.0 / math.sqrt(self.burstiness)

    def label(self) -> str:
        """The level's label: ``rate=R`` for plain Poisson (as before), else with the
        process (``gamma(k=0.5)``, ``constant``)."""
        base = f"rate={self.rate:g}"
        if self.process == "gamma":
            base += f" gamma(k={self.burstiness:g})"
        elif self.process == "constant":
            base += " constant"
        return base

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["asked_cv"] = self.asked_cv
        return d


def _gap(spec: ArrivalSpec, rng: random.Random) -> float:
    if spec.process == "constant":
        return 1.0 / spec.rate
    if spec.process == "poisson":
        return rng.expovariate(spec.rate)
    k = spec.burstiness
    return rng.gammavariate(k, 1.0 / (k * spec.rate))


def ramp_time(tau: float, ramp_s: float) -> float:
    """Wall offset of operational time ``tau`` under a linear ramp of ``ramp_s`` s."""
    if ramp_s <= 0:
        return tau
    if tau <= ramp_s / 2:
        return math.sqrt(2.0 * ramp_s * tau)
    return tau + ramp_s / 2


def schedule(spec: ArrivalSpec) -> list[float]:
    """The send offsets (seconds from the level's start), increasing; seeded by
    ``spec.seed``, so the same spec always gives the same schedule."""
    spec.validate()
    rng = random.Random(spec.seed)
    out: list[float] = []
    tau = 0.0
    while spec.count is None or len(out) < spec.count:
        tau += _gap(spec, rng)
        t = ramp_time(tau, spec.ramp_s)
        if spec.duration_s is not None and t > spec.duration_s:
            break
        out.append(t)
        if len(out) >= MAX_ARRIVALS:
            break
    return out


def arrival_stats(offsets: list[float], ramp_s: float = 0.0) -> dict[str, Any]:
    """What a sequence of send times shows (seconds, any origin; sorted here).

    - ``n``: arrivals.
    - ``achieved_rate`` = (n − 1) / (t_last − t_first): arrivals per second between the
      first and the last one (the gap before the first is not in it); None for n < 2.
    - ``steady_rate`` and ``cv``: the same rate, and the inter-arrival coefficient of
      variation (sample standard deviation of the gaps / their mean), over the arrivals
      at offsets ≥ ``ramp_s`` (so pass offsets from the level's start when there is a
      ramp); None with fewer than 3 arrivals there.
    """
    xs = sorted(offsets)
    n = len(xs)
    out: dict[str, Any] = {"n": n, "achieved_rate": None, "steady_rate": None, "cv": None}
    if n >= 2 and xs[-1] > xs[0]:
        out["achieved_rate"] = (n - 1) / (xs[-1] - xs[0])
    steady = [x for x in xs if x >= ramp_s] if ramp_s > 0 else xs
    gaps = [b - a for a, b in zip(steady, steady[1:])]
    if len(gaps) >= 2:
        mean = sum(gaps) / len(gaps)
        if mean > 0:
            var = sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1)
            out["steady_rate"] = 1.0 / mean
            out["cv"] = math.sqrt(var) / mean
    return out
