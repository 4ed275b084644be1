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
