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


def attribute_codes(
    t0: Any,
    t1: Any,
    codes: Any,
    n_keys: int,
    energy: Sequence[tuple[float, float, float]] = (),
) -> CodedAttribution:
    """The module's definition over arrays (numpy): request i in flight over
    ``[t0[i], t1[i])`` belongs to key ``codes[i]`` (0 ≤ code < ``n_keys``).

    Computed from the running integral S(t) = ∫ 1/n dt (and E(t) = ∫ P/n dt, C(t) =
    ∫ [P known]/n dt): every request's share is S(t_end) − S(t0). The instants where
    n(t) or P(t) change (the windows' ends, the spans' ends) are sorted once (ends
    before starts at one instant); between two of them n and P hold, so each integral is
    a cumulative sum — linear after the sort: a million requests in about a second."""
    import numpy as np

    live = t1 > t0
    n_req = int(live.sum())
    spans = sorted((a, b, j) for a, b, j in energy if b > a)
    span_a = [a for a, _b, _j in spans]
    span_b = [b for _a, b, _j in spans]
    # the instants: request starts (+1) and ends (−1), energy spans' starts and ends (0)
    times = np.concatenate([t0[live], t1[live], span_a, span_b])
    delta = np.concatenate([np.ones(n_req), -np.ones(n_req), np.zeros(2 * len(spans))])
    rank = np.concatenate(  # at one instant: ends (0) before starts (1)
        [np.ones(n_req), np.zeros(n_req), np.ones(len(spans)), np.zeros(len(spans))]
    )
    zeros = np.zeros(n_keys)
    if not len(times):
        return CodedAttribution(zeros, zeros.copy(), zeros.copy(), 0.0)
    order = np.lexsort((rank, times))
    t_sorted = times[order]
    n_seg = np.cumsum(delta[order])[:-1]  # requests in flight over each segment
    dt = np.diff(t_sorted)
    busy_seg = np.where(n_seg > 0, dt, 0.0)
    share_seg = np.divide(busy_seg, n_seg, out=np.zeros_like(dt), where=n_seg > 0)
    s_cum = np.concatenate([[0.0], np.cumsum(share_seg)])
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))  # each instant's place in the sorted order
    starts, ends = at[:n_req], at[n_req : 2 * n_req]
    live_codes = codes[live]
    busy = np.bincount(live_codes, s_cum[ends] - s_cum[starts], n_keys)
    joules, covered = zeros.copy(), zeros.copy()
    if spans:
        a, b = np.array(span_a), np.array(span_b)
        watts = np.array([j for _a, _b, j in spans]) / (b - a)
        mid = t_sorted[:-1]
        idx = np.searchsorted(a, mid, side="right") - 1
        inside = (idx >= 0) & (mid < b[np.clip(idx, 0, None)])
        power = np.where(inside, watts[np.clip(idx, 0, None)], 0.0)
        e_cum = np.concatenate([[0.0], np.cumsum(share_seg * power)])
        c_cum = np.concatenate([[0.0], np.cumsum(np.where(inside, share_seg, 0.0))])
        joules = np.bincount(live_codes, e_cum[ends] - e_cum[starts], n_keys).astype(float)
        covered = np.bincount(live_codes, c_cum[ends] - c_cum[starts], n_keys).astype(float)
    return CodedAttribution(busy, joules, covered, float(busy_seg.sum()))
