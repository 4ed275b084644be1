"""Busy time and energy attributed to the requests in flight (tui/core/attribution.py)."""

from __future__ import annotations

import random

import pytest

from tui.core.attribution import attribute


def test_the_known_schedule_a_alone_then_a_and_b():
    got = attribute([(0.0, 4.0, "A"), (2.0, 4.0, "B")])
    assert got.busy == pytest.approx({"A": 3.0, "B": 1.0}) and got.wall_s == pytest.approx(4.0)
    assert got.joules == {}  # no energy source: no joules, never a guess


def test_shares_add_up_to_the_union_of_the_windows_and_idle_time_goes_to_no_one():
    rng = random.Random(7)
    windows = []
    for i in range(2000):
        t0 = rng.uniform(0, 500)
        windows.append((t0, t0 + rng.expovariate(1.0), f"c{i % 7}"))
    got = attribute(windows)
    union, end = 0.0, -1.0
    for t0, t1, _k in sorted(windows):
        if t1 > end:
            union += t1 - max(t0, end)
            end = t1
    assert sum(got.busy.values()) == pytest.approx(union, rel=1e-9)
    assert got.wall_s == pytest.approx(union, rel=1e-9)


def test_energy_is_split_the_same_way_only_where_a_span_covers_it():
    # 100 W over [0, 2) (200 J) and [2, 4) (200 J): A alone then A and B
    got = attribute([(0.0, 4.0, "A"), (2.0, 4.0, "B")], [(0.0, 2.0, 200.0), (2.0, 4.0, 200.0)])
    assert got.joules == pytest.approx({"A": 300.0, "B": 100.0})
    assert got.covered == pytest.approx({"A": 3.0, "B": 1.0})
    # idle energy (no request in flight) is nobody's; uncovered time adds no joules
    part = attribute([(1.0, 3.0, "A"), (5.0, 6.0, "B")], [(0.0, 2.0, 200.0)])
    assert part.joules == pytest.approx({"A": 100.0}) and "B" not in part.joules
    assert part.covered == pytest.approx({"A": 1.0}) and part.busy["B"] == pytest.approx(1.0)


def test_a_window_of_no_length_counts_its_key_at_zero():
    assert attribute([(1.0, 1.0, "A")]).busy == {"A": 0.0}


def test_each_share_equals_the_integral_of_one_over_n_sampled_finely():
    """A reference by brute force: the integral of 1/n(t) (and P/n) over each window,
    summed on a 0.1 ms grid, for random schedules with ties and touching ends."""
    import numpy as np

    rng = random.Random(11)
    for _ in range(5):
        windows = []
        for i in range(12):
            t0 = round(rng.uniform(0, 8), 2)  # on the grid: ties and touching ends happen
            windows.append((t0, round(t0 + rng.uniform(0.0, 3), 2), "abc"[i % 3]))
        spans = [(1.0, 3.0, 50.0), (4.0, 4.5, 10.0)]
        got = attribute(windows, spans)
        grid = np.arange(0, 12, 1e-4) + 5e-5
        n = sum(((grid >= a) & (grid < b)).astype(float) for a, b, _k in windows)
        power = sum(np.where((grid >= a) & (grid < b), j / (b - a), 0.0) for a, b, j in spans)
        for key in "abc":
            inside = sum(
                ((grid >= a) & (grid < b)).astype(float) for a, b, k in windows if k == key
            )
            want = float(np.sum(np.divide(inside, n, out=np.zeros_like(n), where=n > 0)) * 1e-4)
            joule = float(
                np.sum(np.divide(inside * power, n, out=np.zeros_like(n), where=n > 0)) * 1e-4
            )
            assert got.busy.get(key, 0.0) == pytest.approx(want, abs=1e-3)
            assert got.joules.get(key, 0.0) == pytest.approx(joule, abs=1e-2)
