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
busy time the joules speak for. Where two spans overlap (two processes recording one
device), each instant's power is that of the span covering it that started first. With
no energy source there are no joules — never an estimate from busy time.

**Which requests.** n(t) counts every request of the engine that the caller passes —
the ledger passes all it holds (tui/ledger/shares.py), so a request's share does not
depend on the window a report asks for; a window's busy time is the sum of the shares
of the requests sent within it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

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
    the module's definition (:func:`attribute_codes` computes it)."""
    import numpy as np

    out: Attribution[K] = Attribution()
    rows = list(windows)
    if not rows:
        return out
    keys: dict[K, int] = {}
    code = np.fromiter((keys.setdefault(k, len(keys)) for _a, _b, k in rows), np.int64, len(rows))
    t0 = np.fromiter((a for a, _b, _k in rows), np.float64, len(rows))
    t1 = np.fromiter((b for _a, b, _k in rows), np.float64, len(rows))
    got = attribute_codes(t0, t1, code, len(keys), energy)
    out.wall_s = got.wall_s
    for k, i in keys.items():
        out.busy[k] = float(got.busy[i])
        if got.covered[i] > 0:
            out.joules[k] = float(got.joules[i])
            out.covered[k] = float(got.covered[i])
    return out


@dataclass
class CodedAttribution:
    """:func:`attribute_codes`' answer: per key code, busy seconds, joules and covered
    seconds (arrays of ``n_keys``); ``wall_s`` the time any request was in flight."""

    busy: Any
    joules: Any
    covered: Any
    wall_s: float


@dataclass
class Shares:
    """:func:`request_shares`' answer: per request (arrays in the order given), its busy
    seconds, joules and the busy seconds an energy span covered; ``wall_s`` the time
    any request was in flight (= the sum of ``busy``)."""

    busy: Any
    joules: Any
    covered: Any
    wall_s: float


def attribute_codes(
    t0: Any,
    t1: Any,
    codes: Any,
    n_keys: int,
    energy: Sequence[tuple[float, float, float]] = (),
) -> CodedAttribution:
    """The module's definition over arrays (numpy): request i in flight over
    ``[t0[i], t1[i])`` belongs to key ``codes[i]`` (0 ≤ code < ``n_keys``); each key's
    shares summed (:func:`request_shares`)."""
    import numpy as np

    got = request_shares(t0, t1, energy)
    return CodedAttribution(
        np.bincount(codes, got.busy, n_keys),
        np.bincount(codes, got.joules, n_keys),
        np.bincount(codes, got.covered, n_keys),
        got.wall_s,
    )


def request_shares(t0: Any, t1: Any, energy: Sequence[tuple[float, float, float]] = ()) -> Shares:
    """Each request's share by the module's definition (numpy arrays ``t0``, ``t1``: the
    requests of one engine, each in flight over ``[t0[i], t1[i])``; a window of no
    length has none). ``energy``: spans ``(start, end, joules)`` in the order they were
    recorded; where two overlap, each instant's power is that of the span covering it
    that started first (the first recorded, at one start) — so a span changes the joules
    of the requests in flight within it, and nothing else.

    Computed from the running integral S(t) = ∫ 1/n dt (and E(t) = ∫ P/n dt, C(t) =
    ∫ [P known]/n dt): every request's share is S(t_end) − S(t0). The instants where
    n(t) or P(t) change (the windows' ends, the spans' ends) are sorted once; between
    two of them n and P hold, so each integral is a cumulative sum (linear after the
    sort). At one instant the order of ends and starts does not matter: the segment
    between them has no length."""
    import numpy as np

    t0 = np.asarray(t0, np.float64)
    t1 = np.asarray(t1, np.float64)
    live = t1 > t0
    n_req = int(live.sum())
    bounds, watts = _power_grid(energy)
    times = np.concatenate([t0[live], t1[live], bounds])
    delta = np.concatenate([np.ones(n_req), -np.ones(n_req), np.zeros(len(bounds))])
    zeros = np.zeros(len(t0))
    if not n_req:
        return Shares(zeros, zeros.copy(), zeros.copy(), 0.0)
    order = np.argsort(times)
    t_sorted = times[order]
    n_seg = np.cumsum(delta[order])[:-1]  # requests in flight over each segment
    dt = np.diff(t_sorted)
    busy_seg = np.where(n_seg > 0, dt, 0.0)
    share_seg = np.divide(busy_seg, n_seg, out=np.zeros_like(dt), where=n_seg > 0)
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))  # each instant's place in the sorted order
    starts, ends = at[:n_req], at[n_req : 2 * n_req]

    def integral(per_segment: Any) -> Any:
        cum = np.concatenate([[0.0], np.cumsum(per_segment)])
        out = zeros.copy()
        out[live] = cum[ends] - cum[starts]
        return out

    busy = integral(share_seg)
    joules, covered = zeros.copy(), zeros.copy()
    if len(bounds):
        k = np.searchsorted(bounds, t_sorted[:-1], side="right") - 1
        inside = (k >= 0) & (k < len(watts))
        power = np.where(inside, watts[np.clip(k, 0, len(watts) - 1)], np.nan)
        known = inside & ~np.isnan(power)
        joules = integral(np.where(known, share_seg * np.nan_to_num(power), 0.0))
        covered = integral(np.where(known, share_seg, 0.0))
    return Shares(busy, joules, covered, float(busy_seg.sum()))


def _power_grid(energy: Sequence[tuple[float, float, float]]) -> tuple[Any, Any]:
    """The spans' boundaries (sorted) and the power over each interval between two of
    them (NaN: no span covers it); where spans overlap, the one that started first (the
    first given, at one start) holds the instant."""
    import numpy as np

    spans = [(a, b, j) for a, b, j in energy if b > a]
    if not spans:
        return np.zeros(0), np.zeros(0)
    bounds = np.unique(np.array([x for a, b, _j in spans for x in (a, b)], np.float64))
    watts = np.full(len(bounds) - 1, np.nan)
    ranked = sorted(range(len(spans)), key=lambda i: (spans[i][0], i), reverse=True)
    for i in ranked:  # the latest-starting first: an earlier one paints over it
        a, b, j = spans[i]
        watts[np.searchsorted(bounds, a) : np.searchsorted(bounds, b)] = j / (b - a)
    return bounds, watts
