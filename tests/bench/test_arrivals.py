"""Arrival schedules (tui/bench/run/arrivals.py): each process has the rate and the
inter-arrival CV it is asked for, ramps and limits hold, and seeds repeat."""

from __future__ import annotations

import math
import random

import pytest

from tui.bench.run.arrivals import ArrivalError, ArrivalSpec, arrival_stats, ramp_time, schedule

N = 40_000


def test_constant_gaps_are_exact() -> None:
    xs = schedule(ArrivalSpec("constant", rate=4.0, count=9))
    assert xs == pytest.approx([0.25 * k for k in range(1, 10)])
    s = arrival_stats(xs)
    assert s["achieved_rate"] == pytest.approx(4.0) and s["cv"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(
    ("process", "k", "cv"), [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5)]
)
def test_rate_and_cv_match_what_was_asked(process: str, k: float, cv: float) -> None:
    # n = 40,000 gaps: the sample mean's standard error is CV/√n ≤ 1 %, the sample CV's
    # about √((κ + 2)/4n)·CV with κ = 6/k the gaps' excess kurtosis (≤ 1.3 % for k = 0.25):
    # a 5 % band on the rate and 8 % on the CV are each several standard errors wide
    spec = ArrivalSpec(process, rate=3.0, burstiness=k, count=N, seed=7)
    assert spec.asked_cv == pytest.approx(cv)
    s = arrival_stats(schedule(spec))
    assert s["n"] == N
    assert s["achieved_rate"] == pytest.approx(3.0, rel=0.05)
    assert s["cv"] == pytest.approx(cv, rel=0.08)


def test_gamma_with_burstiness_one_is_poisson_in_distribution() -> None:
    g = arrival_stats(schedule(ArrivalSpec("gamma", rate=2.0, burstiness=1.0, count=N)))
    assert g["cv"] == pytest.approx(1.0, rel=0.08)


def test_plain_poisson_keeps_the_old_send_times() -> None:
    # the --rate level before arrival processes: due += rng.expovariate(rate), seed 0
    rng, due, old = random.Random(0), 0.0, []
    for _ in range(50):
        due += rng.expovariate(2.5)
        old.append(due)
    assert schedule(ArrivalSpec("poisson", rate=2.5, count=50, seed=0)) == old


def test_a_seed_repeats_and_another_differs() -> None:
    a = ArrivalSpec("gamma", rate=1.0, burstiness=0.5, count=20, seed=3)
    assert schedule(a) == schedule(a)
    assert schedule(a) != schedule(ArrivalSpec("gamma", rate=1.0, burstiness=0.5, count=20, seed=4))


def test_the_duration_limit_bounds_the_schedule() -> None:
    xs = schedule(ArrivalSpec("poisson", rate=50.0, duration_s=10.0, seed=1))
    assert xs and max(xs) <= 10.0
    # a Poisson count of mean 500 (sd 22): within 5 sd
    assert abs(len(xs) - 500) < 5 * math.sqrt(500)
    assert len(schedule(ArrivalSpec("poisson", rate=50.0, duration_s=10.0, count=30))) == 30


def test_the_ramp_rises_linearly_then_holds() -> None:
    ramp = 20.0
    xs = schedule(ArrivalSpec("poisson", rate=100.0, ramp_s=ramp, duration_s=60.0, seed=2))
    # expected arrivals by t: R·t²/(2·T_r) in the ramp, R·(t − T_r/2) after it
    for t, expect in ((10.0, 100 * 100 / 40), (20.0, 1000.0), (40.0, 3000.0), (60.0, 5000.0)):
        got = sum(1 for x in xs if x <= t)
        assert abs(got - expect) < 5 * math.sqrt(expect), (t, got, expect)
    after = arrival_stats(xs, ramp_s=ramp)
    assert after["steady_rate"] == pytest.approx(100.0, rel=0.05)
    assert after["cv"] == pytest.approx(1.0, rel=0.08)
    assert ramp_time(5.0, ramp) == pytest.approx(math.sqrt(200.0))
    assert ramp_time(15.0, ramp) == pytest.approx(25.0)


@pytest.mark.parametrize(
    ("spec", "word"),
    [
        (ArrivalSpec("uniform", count=1), "arrival process"),
        (ArrivalSpec(rate=0.0, count=1), "--rate"),
        (ArrivalSpec(rate=math.inf, count=1), "--rate"),
        (ArrivalSpec("gamma", burstiness=0.0, count=1), "--burstiness"),
        (ArrivalSpec(ramp_s=-1.0, count=1), "--ramp-up"),
        (ArrivalSpec(duration_s=math.nan), "--duration"),
        (ArrivalSpec(), "count or a duration"),
        (ArrivalSpec(rate=1e6, duration_s=1e6), "at most"),
    ],
)
def test_bad_processes_are_refused_by_name(spec: ArrivalSpec, word: str) -> None:
    with pytest.raises(ArrivalError, match=word):
        schedule(spec)
