"""Energy per token, defined once. The README and the reports quote these definitions.

**Window.** A request's energy is taken over its E2E window: from the request being sent
(t0) to the end of its stream (t_end) — the window of E2E latency (tui/core/metrics.py),
so prefill is in it. A bench level's energy is taken over the level's window: its first
request sent → its last stream ended.

**Per token.** J/token = E(window) / N and tokens/J = N / E(window), N = the output tokens
of the request (or of the level's ok requests), counted as in tui/core/metrics.py.

**E(window)**, per *domain* (one GPU, one CPU package), from readings taken at sample
times (never exactly at t0 or t_end):

- *counter* — where the domain has a cumulative energy counter (NVML total energy, DCGM
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, amdsmi's energy accumulator, hwmon
  ``energy1_input``, Linux powercap/RAPL ``energy_uj``): E = C(t_end) − C(t0), with C
  linear between two readings. A counter that goes backwards is unwrapped by its range
  where the range is known (RAPL ``max_energy_range_uj``); without one it was reset, and
  the counter cannot say (the power readings are used if there are any).
- *integrated* — else, from sampled power: E = ∫ P dt over the window, P linear between
  samples (trapezoids). Labelled an estimate, with the sample rate.

Both need a reading at or before t0 and one at or after t_end; otherwise E is unknown and
the reason is given. The energy is the *device's*: idle power and any other work on the
device in the window are in it, not only this engine's share. Requests running at once
share the device: a per-request figure is given only for a request that ran alone (a c=1
level, one chat answer); a level's figure covers all its requests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

COUNTER = "counter"
INTEGRATED = "integrated"


@dataclass(frozen=True)
class EnergyReading:
    """One domain's reading at one sample: a counter (cumulative joules), power, or both."""

    domain: str  # "GPU0 NVIDIA H200", "CPU package 0"
    joules: float | None = None  # cumulative counter, device-defined origin
    watts: float | None = None
    counter_source: str | None = None  # "NVML total-energy counter"
    power_source: str | None = None  # "NVML power", "macmon gpu_power"
    wrap_j: float | None = None  # the counter's range: it restarts from 0 after this


@dataclass(frozen=True)
class EnergyPoint:
    t: float  # seconds, on the clock the window is given in
    joules: float | None = None
    watts: float | None = None


@dataclass(frozen=True)
class DomainEnergy:
    """One domain's energy over one window (``joules`` None: unknown, ``reason`` says why)."""

    domain: str
    joules: float | None
    method: str | None = None  # COUNTER | INTEGRATED
    source: str | None = None  # the counter's or the power reading's name
    samples: int = 0  # readings used (those bracketing and inside the window)
    sample_hz: float | None = None  # (samples − 1) / their span
    max_gap_s: float | None = None  # the longest time between two readings used
    reason: str | None = None

    def label(self) -> str:
        """ "NVML total-energy counter", or "integrated from NVML power at 2.0 Hz"."""
        if self.method == COUNTER:
            return str(self.source or "energy counter")
        hz = f" at {self.sample_hz:.1f} Hz" if self.sample_hz else ""
        return f"integrated from {self.source or 'power'}{hz} (est.)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "joules": self.joules,
            "method": self.method,
            "source": self.source,
            "samples": self.samples,
            "sample_hz": self.sample_hz,
            "max_gap_s": self.max_gap_s,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class EnergyUse:
    """The energy of every domain over one window, and per output token."""

    window_s: float
    output_tokens: int | None
    domains: tuple[DomainEnergy, ...] = field(default_factory=tuple)

    @property
    def measured(self) -> tuple[DomainEnergy, ...]:
        return tuple(d for d in self.domains if d.joules is not None)

    @property
    def joules(self) -> float | None:
        """Σ over the domains measured (which ones: :attr:`measured`); None if none."""
        known = self.measured
        return sum(d.joules for d in known if d.joules is not None) if known else None

    @property
    def estimated(self) -> bool:
        """Whether any domain was integrated from power rather than read off a counter."""
        return any(d.method == INTEGRATED for d in self.measured)

    @property
    def j_per_token(self) -> float | None:
        j, n = self.joules, self.output_tokens
        return j / n if j is not None and n else None

    @property
    def tokens_per_j(self) -> float | None:
        j, n = self.joules, self.output_tokens
        return n / j if j and n is not None else None

    def short(self) -> str:
        """ "0.42 J/tok (GPU0 counter)" — the per-answer line's few cells."""
        jpt = self.j_per_token
        if jpt is None:
            return ""
        est = " est." if self.estimated else ""
        names = "+".join(d.domain.split(" ", 1)[0] for d in self.measured)
        how = "counter" if not self.estimated else "power"
        return f"{jpt:.3g} J/tok ({names} {how}{est})"

    def describe(self) -> str:
        """One line: J/token, tokens/J, and each domain with its source."""
        parts = []
        for d in self.domains:
            if d.joules is None:
                parts.append(f"{d.domain}: unknown ({d.reason})")
            else:
                parts.append(f"{d.domain} {d.joules:.3g} J ({d.label()})")
        head = "energy"
        jpt, tpj = self.j_per_token, self.tokens_per_j
        if jpt is not None and tpj is not None:
            head += f" {jpt:.3g} J/token, {tpj:.3g} tokens/J"
            head += " (estimate)" if self.estimated else ""
        elif self.joules is not None:
            head += f" {self.joules:.3g} J (no output tokens)"
        else:
            head += " unknown"
        return f"{head} over {self.window_s:.2f} s: " + "; ".join(parts) if parts else head

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_s": self.window_s,
            "output_tokens": self.output_tokens,
            "joules": self.joules,
            "j_per_token": self.j_per_token,
            "tokens_per_j": self.tokens_per_j,
            "estimated": self.estimated,
            "domains": [d.to_dict() for d in self.domains],
        }


def _bracket(points: Sequence[EnergyPoint], t0: float, t1: float) -> list[EnergyPoint] | str:
    """The points from the last one at or before t0 to the first one at or after t1, in
    time order; a reason string when there is none on one side."""
    pts = sorted(points, key=lambda p: p.t)
    before = [i for i, p in enumerate(pts) if p.t <= t0]
    after = [i for i, p in enumerate(pts) if p.t >= t1]
    if not before:
        return "no reading at or before the window's start"
    if not after:
        return "no reading at or after the window's end"
    return pts[before[-1] : after[0] + 1]


def _stats(pts: list[EnergyPoint]) -> tuple[float | None, float | None]:
    span = pts[-1].t - pts[0].t
    gaps = [b.t - a.t for a, b in zip(pts, pts[1:])]
    hz = (len(pts) - 1) / span if span > 0 else None
    return hz, (max(gaps) if gaps else None)


def counter_energy(
    points: Sequence[EnergyPoint], t0: float, t1: float, wrap_j: float | None = None
) -> tuple[float | None, list[EnergyPoint], str | None]:
    """C(t1) − C(t0) from counter readings (see the module docstring): (joules, the points
    used, None) or (None, [], reason)."""
    usable = [p for p in points if p.joules is not None and math.isfinite(p.joules)]
    got = _bracket(usable, t0, t1)
    if isinstance(got, str):
        return None, [], got
    pts = [got[0]]
    for p in got[1:]:
        if p.t > pts[-1].t:
            pts.append(p)
    # unwrap into a cumulative series starting at 0
    cum = [0.0]
    for a, b in zip(pts, pts[1:]):
        assert a.joules is not None and b.joules is not None
        step = b.joules - a.joules
        if step < 0:
            if not wrap_j or wrap_j <= 0:
                return None, [], "the counter went backwards (reset)"
            step += wrap_j
        cum.append(cum[-1] + step)

    def at(t: float) -> float:
        if len(pts) == 1:
            return cum[0]
        for i in range(len(pts) - 1):
            a, b = pts[i], pts[i + 1]
            if a.t <= t <= b.t:
                return cum[i] + (cum[i + 1] - cum[i]) * (t - a.t) / (b.t - a.t)
        return cum[-1]

    return max(0.0, at(t1) - at(t0)), pts, None


def integrated_energy(
    points: Sequence[EnergyPoint], t0: float, t1: float
) -> tuple[float | None, list[EnergyPoint], str | None]:
    """∫ P dt over [t0, t1], P linear between readings (trapezoids): (joules, points, None)
    or (None, [], reason)."""
    usable = [p for p in points if p.watts is not None and math.isfinite(p.watts)]
    got = _bracket(usable, t0, t1)
    if isinstance(got, str):
        return None, [], got
    pts = [got[0]]
    for p in got[1:]:
        if p.t > pts[-1].t:
            pts.append(p)
    if len(pts) == 1:  # t0 == t1 on a reading
        return 0.0, pts, None
    total = 0.0
    for a, b in zip(pts, pts[1:]):
        lo, hi = max(a.t, t0), min(b.t, t1)
        if hi <= lo:
            continue
        assert a.watts is not None and b.watts is not None
        slope = (b.watts - a.watts) / (b.t - a.t)
        p_lo = a.watts + slope * (lo - a.t)
        p_hi = a.watts + slope * (hi - a.t)
        total += (p_lo + p_hi) / 2.0 * (hi - lo)
    return max(0.0, total), pts, None


def domain_energy(
    domain: str,
    points: Sequence[EnergyPoint],
    t0: float,
    t1: float,
    counter_source: str | None = None,
    power_source: str | None = None,
    wrap_j: float | None = None,
) -> DomainEnergy:
    """One domain's energy over [t0, t1]: its counter where it has one, else its power."""
    reasons = []
    if any(p.joules is not None for p in points):
        j, used, why = counter_energy(points, t0, t1, wrap_j)
        if j is not None:
            hz, gap = _stats(used)
            return DomainEnergy(domain, j, COUNTER, counter_source, len(used), hz, gap)
        reasons.append(f"counter: {why}")
    if any(p.watts is not None for p in points):
        j, used, why = integrated_energy(points, t0, t1)
        if j is not None:
            hz, gap = _stats(used)
            return DomainEnergy(domain, j, INTEGRATED, power_source, len(used), hz, gap)
        reasons.append(f"power: {why}")
    return DomainEnergy(domain, None, reason="; ".join(reasons) or "no energy or power reading")


def window_energy(
    series: Iterable[tuple[EnergyReading, list[EnergyPoint]]],
    t0: float,
    t1: float,
    output_tokens: int | None,
) -> EnergyUse:
    """Every domain's energy over [t0, t1]; ``series``: (a reading that names the domain and
    its sources, the domain's points)."""
    domains = tuple(
        domain_energy(r.domain, pts, t0, t1, r.counter_source, r.power_source, r.wrap_j)
        for r, pts in series
    )
    return EnergyUse(max(0.0, t1 - t0), output_tokens, domains)
