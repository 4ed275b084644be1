"""Busy time and energy attributed to the requests that were in flight — defined once.
The README, docs/ledger.md and ``infertop usage`` quote this definition.

**Busy time.** For the requests of one engine (one upstream), each in flight over
``[t0, t_end)`` (sent → its stream's end, the E2E window of tui/core/metrics.py), let
n(t) be the number of them in flight at instant t. Request i's share is

    busy_i = ∫ over [t0_i, t_end_i) of 1 / n(t) dt

— each instant of the engine's busy time split equally among the requests in flight
then. A client's busy time is the sum of its requests' shares. The shares add up to the
time at least one request was in flight (the union of the windows), so nothing is
counted twice and no idle time is given to anyone. Example: A alone for 2 s, then A and B
together for 2 s → A 2 + 1 = 3 s, B 1 s, together the 4 s the engine was busy.

It is an **attribution**, not a measurement: an engine batching two requests does not
spend exactly half of each instant on each (a long prompt's prefill costs more than a
decode step). It answers "who kept the engine busy" by the one rule that needs nothing
but the requests' own stamps, and adds up.

**Energy**, the same way: where the device's energy is known over a span (a counter's
difference or integrated power, tui/core/energy.py), taken as spread evenly over that
span, each instant's energy is split equally among the requests in flight:

    J_i = ∫ over [t0_i, t_end_i) of P(t) / n(t) dt

Energy while no request was in flight (idle power) is given to no one. Time of a request
that no energy span covers adds no joules: the covered share says how much of the
busy time the joules speak for. With no energy source there are no joules — never an
estimate from busy time.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass
class Attribution(Generic[K]):
    """Per key: busy seconds (``busy``), joules (``joules``: only keys with covered
    time), and the busy seconds an energy span covered (``covered``); ``wall_s``: the
    time at least one request was in flight (= the sum of ``busy``)."""

    busy: dict[K, float] = field(default_factory=dict)
    joules: dict[K, float] = field(default_factory=dict)
    covered: dict[K, float] = field(default_factory=dict)
    wall_s: float = 0.0


def attribute(
    windows: Iterable[tuple[float, float, K]],
    energy: Sequence[tuple[float, float, float]] = (),
) -> Attribution[K]:
    """Busy time (and energy, from ``energy`` spans ``(start, end, joules)`` that do not
    overlap each other) attributed to the keys of ``windows`` ``(t0, t_end, key)`` by
    the module's definition. One sort, then O(1) per event: running integrals of
    1/n(t), P(t)/n(t) and [P known]/n(t), each request's share their difference between
    its end and its start."""
    out: Attribution[K] = Attribution()
    points: list[tuple[float, int, int]] = []  # (time, order: ends before starts, index)
    keys: list[K] = []
    for t0, t1, key in windows:
        if not t1 > t0:
            out.busy.setdefault(key, 0.0)
            continue
        i = len(keys)
        keys.append(key)
        points.append((t0, 1, i))
        points.append((t1, 0, i))
    for j, (a, b, _j) in enumerate(energy):
        if b > a:
            points.append((a, 3, j))
            points.append((b, 2, j))
    points.sort()
    at_start = [(0.0, 0.0, 0.0)] * len(keys)
    share = joule = cover = 0.0  # the running integrals
    n = 0  # requests in flight
    power: float | None = None  # W over the current elementary segment, None: unknown
    last = points[0][0] if points else 0.0
    wall = 0.0
    for t, kind, idx in points:
        if n and t > last:
            dt = t - last
            wall += dt
            share += dt / n
            if power is not None:
                joule += power * dt / n
                cover += dt / n
        last = t
        if kind == 1:
            n += 1
            at_start[idx] = (share, joule, cover)
        elif kind == 0:
            n -= 1
            s0, j0, c0 = at_start[idx]
            key = keys[idx]
            out.busy[key] = out.busy.get(key, 0.0) + share - s0
            if cover > c0:
                out.joules[key] = out.joules.get(key, 0.0) + joule - j0
                out.covered[key] = out.covered.get(key, 0.0) + cover - c0
        elif kind == 2:
            power = None
        else:
            start, end, joules = energy[idx]
            power = joules / (end - start)
    out.wall_s = wall
    return out
