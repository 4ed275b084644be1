"""The capacity search's bracketing (tui/bench/run/bracket.py), against servers whose
attainment as a function of rate is known."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tui.bench.run.bracket import ProbeResult, SearchBounds, bracket, capacity_result, next_rate


def search(
    attain: Callable[[float], float], start: float, target: float = 0.9, n: int = 100
) -> tuple[dict, list[ProbeResult]]:  # type: ignore[type-arg]
    bounds = SearchBounds(start_rate=start)
    probes: list[ProbeResult] = []
    for _ in range(50):
        r = next_rate(probes, bounds)
        if r is None:
            break
        probes.append(ProbeResult(r, round(attain(r) * n), n, target))
    return capacity_result(probes, bounds, "done"), probes


@pytest.mark.parametrize("start", [0.05, 1.0, 3.7, 40.0])
def test_finds_a_step_threshold_within_the_tolerance(start: float) -> None:
    true = 3.2
    out, probes = search(lambda r: 1.0 if r <= true else 0.5, start)
    lo, hi = out["interval"]
    assert lo is not None and hi is not None
    assert lo <= true < hi and hi / lo <= 1.15
    assert out["capacity"] == lo and len(probes) <= 12
    # every pass is at or below lo, every fail at or above hi
    assert all(p.rate <= lo for p in probes if p.passed)
    assert all(p.rate >= hi for p in probes if not p.passed)


def test_a_gradual_decline_meets_the_target_at_its_crossing() -> None:
    # attainment falls linearly from 1 at 0 req/s to 0 at 10 req/s: 0.9 at 1 req/s
    out, _ = search(lambda r: max(0.0, 1 - r / 10), 1.5)
    lo, hi = out["interval"]
    assert lo <= 1.0 < hi


def test_nothing_passes_and_everything_passes_are_said() -> None:
    out, _ = search(lambda r: 0.0, 1.0)
    assert out["capacity"] is None and "below" in out["notes"][0]
    out, _ = search(lambda r: 1.0, 1.0)
    assert out["interval"][1] is None and "at least" in out["notes"][0]


def test_a_probe_stopped_early_fails_and_noise_is_reported() -> None:
    p = ProbeResult(2.0, 95, 100, 0.9, stop_reason="saturated")
    assert not p.passed
    probes = [
        ProbeResult(1.0, 95, 100, 0.9),
        ProbeResult(2.0, 95, 100, 0.9),
        ProbeResult(1.5, 80, 100, 0.9, low=0.71, high=0.95),
        ProbeResult(4.0, 10, 100, 0.9),
    ]
    assert bracket(probes) == (2.0, 4.0)
    out = capacity_result(probes, SearchBounds(1.0), "done")
    assert any("non-monotone" in n for n in out["notes"])
    assert any("within noise" in n for n in out["notes"])


@pytest.mark.parametrize(("start", "true"), [(1.0, 5), (1.0, 1), (16.0, 6), (4.0, 37)])
def test_a_concurrency_search_ends_on_adjacent_whole_numbers(start: float, true: int) -> None:
    bounds = SearchBounds(start_rate=start, min_rate=1, max_rate=256, integer=True)
    probes: list[ProbeResult] = []
    for _ in range(50):
        r = next_rate(probes, bounds)
        if r is None:
            break
        assert r == int(r) and r >= 1
        probes.append(ProbeResult(r, 100 if r <= true else 50, 100, 0.9))
    assert bracket(probes) == (true, true + 1)


def test_a_concurrency_search_with_no_pass_down_to_one_says_below() -> None:
    bounds = SearchBounds(start_rate=4.0, min_rate=1, integer=True)
    probes: list[ProbeResult] = []
    while (r := next_rate(probes, bounds)) is not None:
        probes.append(ProbeResult(r, 0, 10, 0.9))
    assert [p.rate for p in probes] == [4.0, 2.0, 1.0] and bracket(probes) == (None, 1.0)
