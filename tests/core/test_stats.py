"""Statistics against answers computed by hand (and NumPy's documented definition)."""

import pytest

from tui.core.stats import bootstrap_ci, median, percentile, ratio_ci, summarize
from tui.core.window import RollingWindow


def test_percentile_linear_interpolation():
    xs = [15, 20, 35, 40, 50]
    assert percentile(xs, 0) == 15
    assert percentile(xs, 100) == 50
    assert percentile(xs, 50) == 35
    # rank (5-1)*0.9 = 3.6 -> 40 + 0.6*(50-40) = 46
    assert percentile(xs, 90) == pytest.approx(46.0)
    assert percentile([3, 1, 2, 4], 50) == 2.5
    assert median([7]) == 7


def test_percentile_rejects_bad_input():
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 101)


def test_summarize_skips_unmeasurable():
    s = summarize([1.0, None, 3.0, 2.0])
    assert s.n == 3 and s.p50 == 2.0 and s.mean == 2.0 and s.min == 1.0 and s.max == 3.0
    assert summarize([None]).n == 0


def test_bootstrap_interval_of_a_constant_sample_is_that_constant():
    iv = bootstrap_ci([5.0] * 10, n_boot=200)
    assert (iv.estimate, iv.low, iv.high) == (5.0, 5.0, 5.0)


def test_bootstrap_interval_brackets_the_median():
    xs = [float(x) for x in range(1, 22)]  # median 11
    iv = bootstrap_ci(xs, n_boot=500, seed=1)
    assert iv.estimate == 11.0
    assert 6.0 <= iv.low < 11.0 < iv.high <= 16.0


def test_ratio_interval():
    a = [20.0, 20.0, 20.0]
    b = [10.0, 10.0, 10.0]
    iv = ratio_ci(a, b, n_boot=100)
    assert (iv.estimate, iv.low, iv.high) == (2.0, 2.0, 2.0)


def test_rolling_window_keeps_the_last_values():
    w = RollingWindow(3)
    for v in [1, 2, 3, 4]:
        w.push(v)
    assert w.snapshot() == [2, 3, 4]
    assert w.last == 4 and w.percentile(50) == 3
    with pytest.raises(ValueError):
        RollingWindow(0)


def _exact_median_distribution(xs: list[float]) -> dict[float, float]:
    """Every resample of xs (n^n index tuples, equally likely) and its median."""
    import itertools

    n = len(xs)
    dist: dict[float, float] = {}
    for idx in itertools.product(range(n), repeat=n):
        m = median([xs[i] for i in idx])
        dist[m] = dist.get(m, 0.0) + 1.0 / n**n
    return dist


@pytest.mark.parametrize("xs", [[1.0, 2.0, 4.0, 8.0], [1.0, 2.0, 4.0, 8.0, 16.0]])
def test_resampled_median_has_the_exact_bootstrap_distribution(xs):
    """The O(1) order-statistic draw gives each resample median with the probability
    that drawing n values with replacement and taking their median gives it."""
    import random

    from tui.core.stats import resampled_median

    exact = _exact_median_distribution(xs)
    rng = random.Random(3)
    draws = 40_000
    seen: dict[float, int] = {}
    for _ in range(draws):
        m = resampled_median(xs, rng)
        seen[m] = seen.get(m, 0) + 1
    assert set(seen) <= set(exact)
    for value, p in exact.items():
        assert seen.get(value, 0) / draws == pytest.approx(p, abs=0.01), value


@pytest.mark.parametrize("n", [2, 3, 10, 11])
def test_bootstrap_ci_of_a_median_is_the_resampled_medians_percentiles(n):
    """bootstrap_ci reuses one set of rank draws for every sample of n values (a report's
    six metrics per level); its interval is still that of ``n_boot`` resampled medians
    drawn afresh from ``random.Random(seed)``, for each sample."""
    import random

    from tui.core.stats import resampled_median

    rng = random.Random(n)
    for seed in (0, 7):
        for _sample in range(3):
            xs = [rng.lognormvariate(0, 1) for _ in range(n)]
            draw = random.Random(seed)
            boots = [resampled_median(sorted(xs), draw) for _ in range(500)]
            ci = bootstrap_ci(xs, n_boot=500, seed=seed)
            alpha = (1 - 0.95) / 2 * 100  # as bootstrap_ci computes it (not exactly 2.5)
            assert (ci.low, ci.high) == (percentile(boots, alpha), percentile(boots, 100 - alpha))
            assert ci.estimate == median(xs)


def test_weighted_percentiles_are_those_of_the_values_repeated():
    """Issue 48: a gap standing for k tokens is one value of weight k, never k copies;
    its percentiles are exactly those of the copies."""
    import random

    from tui.core.stats import summarize_weighted, weighted_percentile

    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(1, 12)
        values = [rng.choice([0.5, 1.0, 2.0, rng.random() * 10]) for _ in range(n)]
        weights = [rng.randint(0, 5) for _ in range(n)]
        if not any(weights):
            weights[0] = 1
        copies = [v for v, w in zip(values, weights) for _ in range(w)]
        for q in (0, 1, 50, 90, 99, 100):
            assert weighted_percentile(values, weights, q) == percentile(copies, q)
        s, want = summarize_weighted(values, weights), summarize(copies)
        assert (s.n, s.min, s.max, s.p50, s.p90, s.p95, s.p99) == (
            want.n, want.min, want.max, want.p50, want.p90, want.p95, want.p99
        )  # fmt: skip
        assert s.mean == pytest.approx(want.mean)


def test_a_weight_of_two_to_the_53_costs_nothing():
    import time

    from tui.core.stats import summarize_weighted, weighted_percentile

    start = time.thread_time()
    assert weighted_percentile([1.0, 5.0], [1, 2**53 - 1], 50) == 5.0
    assert summarize_weighted([1.0, 5.0], [2**53 - 1, 1]).n == 2**53
    assert time.thread_time() - start < 0.1  # copies would need 64 PiB


def test_weighted_percentile_rejects_bad_input():
    from tui.core.stats import summarize_weighted, weighted_percentile

    with pytest.raises(ValueError):
        weighted_percentile([1.0], [0], 50)  # nothing weighs
    with pytest.raises(ValueError):
        weighted_percentile([1.0, 2.0], [1], 50)  # a value without its weight
    with pytest.raises(ValueError):
        weighted_percentile([1.0], [-1], 50)
    with pytest.raises(ValueError):
        weighted_percentile([1.0], [1.5], 50)  # type: ignore[list-item]
    assert summarize_weighted([], []).n == 0


def test_several_weighted_percentiles_from_one_sort_are_each_ones():
    """weighted_percentiles (one sort for p50 and p90 of a span) gives exactly what
    weighted_percentile gives for each q: weights all 1 (the values' own sort) or not."""
    import random

    from tui.core.stats import weighted_percentile, weighted_percentiles

    rng = random.Random(7)
    qs = (0, 10, 50, 90, 99.9, 100)
    for _ in range(300):
        n = rng.randint(1, 40)
        values = [rng.choice([1.0, 2.5, rng.random() * 10]) for _ in range(n)]
        for weights in ([1] * n, [rng.randint(0, 4) or 1 for _ in range(n)]):
            got = weighted_percentiles(values, weights, qs)
            assert got == [weighted_percentile(values, weights, q) for q in qs]
            if weights == [1] * n:
                assert got == [percentile(values, q) for q in qs]
    with pytest.raises(ValueError):
        weighted_percentiles([1.0, 2.0], [1, True], (50,))  # a bool is no whole number here
    with pytest.raises(ValueError):
        weighted_percentiles([1.0], [1], (50, 101))
    with pytest.raises(ValueError):
        weighted_percentiles([], [], (50,))
