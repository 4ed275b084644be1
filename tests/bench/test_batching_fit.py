"""The batching-model fit T_total(N) = N·T_single/(1 + α·N) on data with a known α."""

from __future__ import annotations

import random

import pytest

from tui.bench.run.records import LevelRun
from tui.bench.stats.batching import fit_alpha, fit_batching, fit_with_interval, model_t_total

LEVELS = [2, 4, 8, 16]


@pytest.mark.parametrize("alpha", [0.0, 0.05, 0.3, 0.9, -0.03])
def test_exact_data_recovers_alpha(alpha):
    t_single = 1234.5
    t_total = [model_t_total(n, t_single, alpha) for n in LEVELS]
    assert fit_alpha(LEVELS, t_total, t_single) == pytest.approx(alpha, abs=1e-6)


def test_one_level_is_solved_exactly():
    # 2 requests in flight take 1.6× as long as one: 2/1.6 = 1 + 2α → α = 0.125
    assert fit_alpha([2], [1600.0], 1000.0) == pytest.approx(0.125, abs=1e-6)
    # serial (twice as long): α = 0; perfect batching at N=2 (as long as one): α = 0.5
    assert fit_alpha([2], [2000.0], 1000.0) == pytest.approx(0.0, abs=1e-6)
    assert fit_alpha([2], [1000.0], 1000.0) == pytest.approx(0.5, abs=1e-6)


def noisy_samples(alpha: float, n_requests: int, noise: float, seed: int) -> dict[int, list[float]]:
    rng = random.Random(seed)
    t_single = 800.0
    out = {1: [t_single * rng.gauss(1, noise) for _ in range(n_requests)]}
    for n in LEVELS:
        out[n] = [
            model_t_total(n, t_single, alpha) * rng.gauss(1, noise) for _ in range(n_requests)
        ]
    return out


def test_noisy_data_interval_covers_the_true_alpha():
    fit = fit_with_interval(noisy_samples(0.3, 20, 0.05, seed=3), n_boot=400)
    a = fit["alpha"]
    assert a["low"] < 0.3 < a["high"]
    assert a["high"] - a["low"] < 0.1  # 5 % noise, 20 requests a level: a tight interval
    assert a["low"] <= a["estimate"] <= a["high"]
    # residuals per level: measured − fitted, small against 5 % noise on the means
    rows = {r["concurrency"]: r for r in fit["levels"]}
    assert rows[1]["fitted_ms"] is None and rows[1]["speedup"] == 1.0  # the anchor
    for n in LEVELS:
        r = rows[n]
        assert r["residual_ms"] == pytest.approx(r["t_total_ms"] - r["fitted_ms"])
        assert abs(r["residual_pct"]) < 5
        assert r["speedup_fitted"] == pytest.approx(1 + a["estimate"] * n)
    assert fit["rmse_ms"] > 0


def test_wider_noise_gives_a_wider_interval():
    narrow = fit_with_interval(noisy_samples(0.2, 10, 0.02, seed=1), n_boot=300)["alpha"]
    wide = fit_with_interval(noisy_samples(0.2, 10, 0.2, seed=1), n_boot=300)["alpha"]
    assert wide["high"] - wide["low"] > 3 * (narrow["high"] - narrow["low"])


def test_a_curve_the_model_cannot_follow_shows_in_the_residuals():
    """Perfect batching up to 4 slots, then a queue: no single α fits, and it shows."""
    t1 = 1000.0
    measured = {1: [t1], 2: [t1], 4: [t1], 8: [2 * t1], 16: [4 * t1]}
    fit = fit_with_interval(measured, n_boot=50)
    assert max(abs(r["residual_pct"] or 0) for r in fit["levels"]) > 15


def test_no_fit_without_c1_or_a_second_level():
    with pytest.raises(ValueError, match="c=1"):
        fit_with_interval({2: [1.0], 4: [2.0]})
    with pytest.raises(ValueError, match="N >= 2"):
        fit_with_interval({1: [1.0]})
    assert fit_batching([], {}, 10) == {
        "alpha": None,
        "reason": "the batching fit needs a c=1 level (T_single)",
    }


def test_fit_batching_from_records_counts_the_queue_before_the_engine_stamped_sent():
    """A serial engine that stamps a request sent only when it starts it: e2e alone would
    make 2 in flight look as fast as 1 (α = 0.5); the client latency keeps the wait."""
    from tests.bench.synthetic import level, record

    c1 = level([record(0, 100, 10, 10, index=i) for i in range(3)], 1)  # e2e 190 ms
    waiting = []
    for i in range(4):
        r = record(0, 100, 10, 10, "c=2", 2, index=i)
        r.pre_send_wait_ms = 190.0 if i % 2 else 0.0  # every other one queued behind one
        waiting.append(r)
    out = fit_batching([c1, level(waiting, 2)], {1: 1.0, 2: 1.0}, 100)
    rows = {r["concurrency"]: r for r in out["levels"]}
    assert rows[1]["t_total_ms"] == pytest.approx(190.0)
    assert rows[2]["t_total_ms"] == pytest.approx(285.0)  # (190 + 380) / 2
    # 2·190/285 = 1 + 2α → α = 1/6
    assert out["alpha"]["estimate"] == pytest.approx(1 / 6, abs=1e-6)
    assert rows[2]["eta"] == 1.0 and out["model"].startswith("T_total(N)")


def test_fit_batching_skips_stopped_and_non_concurrency_levels():
    from tests.bench.synthetic import level, record

    c1 = level([record(0, 100, 10, 10, index=i) for i in range(2)], 1)
    stopped = level([record(0, 100, 10, 10, "c=2", 2, index=i) for i in range(2)], 2)
    stopped.complete = False
    depth = LevelRun("e", "depth=0", "depth", concurrency=1, complete=True)
    out = fit_batching([c1, stopped, depth], {}, 10)
    assert out["alpha"] is None and "N >= 2" in out["reason"]
