"""Order statistics and bootstrap intervals, exact and dependency-free.

``percentile`` interpolates linearly between closest ranks (NumPy's default, "type 7"):
for sorted x of length n, rank r = (n − 1)·q/100, value = x[⌊r⌋] + (r − ⌊r⌋)·(x[⌊r⌋+1] − x[⌊r⌋]).

Bootstrap of a median (:func:`bootstrap_ci`, :func:`ratio_ci` with ``stat=median``): a
resample of n values drawn with replacement from sorted x is n indices ⌊n·U⌋, U uniform on
[0, 1). The index map is monotone, so the resample's k-th smallest value is x[⌊n·U₍ₖ₎⌋],
U₍ₖ₎ the k-th smallest of n uniforms, which is Beta(k, n − k + 1); the next one is
U₍ₖ₊₁₎ = U₍ₖ₎ + (1 − U₍ₖ₎)·Beta(1, n − k). So each resample's median (type 7: one order
statistic, or the mean of two) is drawn exactly in O(1), not by drawing and sorting n
values: the same bootstrap distribution, at a cost independent of n.

Weighted samples (:func:`weighted_percentile`, :func:`summarize_weighted`): value xᵢ with
whole weight wᵢ stands for wᵢ equal values (a gap spread over the k tokens of its chunk is
one value of weight k). Their percentile is exactly :func:`percentile` of that multiset,
found without building it: the pairs sorted by value, the running sum of the weights
searched for the ranks ⌊r⌋ and ⌊r⌋ + 1 (r = (Σw − 1)·q/100). Cost O(m log m) for m pairs,
whatever the weights.
"""

from __future__ import annotations

import functools
import math
import random
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

PERCENTILES = (50, 90, 95, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; ValueError when empty."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    xs = sorted(values)
    r = (len(xs) - 1) * q / 100.0
    lo = math.floor(r)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (r - lo) * (xs[hi] - xs[lo])


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


@dataclass(frozen=True)
class Summary:
    """n, mean, min, max and the standard percentiles of a sample."""

    n: int
    mean: float | None
    min: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        return dict(self.__dict__)


def summarize(values: Sequence[float | None]) -> Summary:
    """Summary of the non-None values (None = not measurable for that request)."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return Summary(0, None, None, None, None, None, None, None)
    xs.sort()  # once: percentile() of a sorted list sorts in linear time
    p = [percentile(xs, q) for q in PERCENTILES]
    return Summary(len(xs), sum(xs) / len(xs), xs[0], xs[-1], *p)


def _by_value(values: Sequence[float], weights: Sequence[int]) -> tuple[list[float], list[int]]:
    """The values sorted, with the running sum of their weights (weight 0 dropped)."""
    if len(values) != len(weights):
        raise ValueError(f"{len(values)} values but {len(weights)} weights")
    for w in weights:
        if type(w) is not int or w < 0:
            raise ValueError(f"a weight must be a whole number >= 0, got {w!r}")
    pairs = sorted((v, w) for v, w in zip(values, weights) if w)
    return [v for v, _ in pairs], list(accumulate(w for _, w in pairs))


def _weighted_at(xs: list[float], cum: list[int], q: float) -> float:
    """Type-7 percentile of the multiset of sorted ``xs`` with running weights ``cum``."""
    n = cum[-1]
    r = (n - 1) * q / 100.0
    lo = min(math.floor(r), n - 1)  # (a float rank of a huge n may round past n − 1)
    hi = min(lo + 1, n - 1)
    a = xs[bisect_right(cum, lo)]  # the value at rank t: the first whose running sum > t
    b = xs[bisect_right(cum, hi)]
    return a + (r - lo) * (b - a)


def weighted_percentile(values: Sequence[float], weights: Sequence[int], q: float) -> float:
    """:func:`percentile` of the multiset in which ``values[i]`` appears ``weights[i]``
    times (the module docstring), never built; ValueError when it is empty."""
    return weighted_percentiles(values, weights, (q,))[0]


def weighted_percentiles(
    values: Sequence[float], weights: Sequence[int], qs: Sequence[float]
) -> list[float]:
    """:func:`weighted_percentile` at each of ``qs``, from one sort. When every weight is 1
    (a token per chunk, the common case) that is the values' own sort, and each value is
    :func:`percentile`'s of the values, exactly (the same ranks, the same arithmetic)."""
    for q in qs:
        if not 0 <= q <= 100:
            raise ValueError(f"percentile q must be within 0..100, got {q}")
    n = len(values)
    if n and n == len(weights) and weights.count(1) == n and set(map(type, weights)) == {int}:
        xs = sorted(values)  # each value weighs 1: its rank is its index
        out = []
        for q in qs:
            r = (n - 1) * q / 100.0
            lo = math.floor(r)
            hi = min(lo + 1, n - 1)
            out.append(xs[lo] + (r - lo) * (xs[hi] - xs[lo]))
        return out
    xs, cum = _by_value(values, weights)
    if not xs:
        raise ValueError("percentile of no values")
    return [_weighted_at(xs, cum, q) for q in qs]


def summarize_weighted(values: Sequence[float], weights: Sequence[int]) -> Summary:
    """:func:`summarize` of the multiset in which ``values[i]`` appears ``weights[i]``
    times, never built: n = Σ weights, mean = Σ value·weight / n."""
    xs, cum = _by_value(values, weights)
    if not xs:
        return Summary(0, None, None, None, None, None, None, None)
    n = cum[-1]
    total = math.fsum(v * w for v, w in zip(values, weights))
    p = [_weighted_at(xs, cum, q) for q in PERCENTILES]
    return Summary(n, total / n, xs[0], xs[-1], *p)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a bootstrap confidence interval."""

    estimate: float
    low: float
    high: float
    level: float = 0.95


def _median_ranks(n: int, rng: random.Random) -> tuple[int, int]:
    """The 0-based ranks of the order statistics whose mean is the median of one bootstrap
    resample of n values (n > 1; the same rank twice when n is odd): see the module
    docstring. Two draws for even n, one for odd."""
    r = (n - 1) / 2
    k = math.floor(r)  # 0-based rank of the lower order statistic
    u = rng.betavariate(k + 1, n - k)
    lo = min(int(u * n), n - 1)
    if r == k:
        return lo, lo
    u2 = u + (1.0 - u) * rng.betavariate(1, n - k - 1)
    return lo, min(int(u2 * n), n - 1)


def resampled_median(xs: Sequence[float], rng: random.Random) -> float:
    """The median of one bootstrap resample of ``xs`` (sorted ascending, non-empty), drawn
    through its order statistics (see the module docstring): exact, O(1)."""
    if len(xs) == 1:
        return xs[0]
    lo, hi = _median_ranks(len(xs), rng)
    return xs[lo] if lo == hi and len(xs) % 2 else (xs[lo] + xs[hi]) / 2


@functools.lru_cache(maxsize=16)
def _median_rank_draws(n: int, n_boot: int, seed: int) -> tuple[tuple[int, int], ...]:
    """:func:`_median_ranks` of ``n_boot`` resamples from ``random.Random(seed)``.

    They depend on n alone, not on the values: one set serves every metric of a level with
    as many values (six per level in a bench report), the same draws as one per call."""
    rng = random.Random(seed)
    return tuple(_median_ranks(n, rng) for _ in range(n_boot))


def _resampler(
    values: Sequence[float], stat: Callable[[Sequence[float]], float], rng: random.Random
) -> Callable[[], float]:
    """One resample's statistic per call: the O(1) order-statistic draw for the median."""
    n = len(values)
    if stat is median and n > 1:
        xs = sorted(values)
        return lambda: resampled_median(xs, rng)
    return lambda: stat(rng.choices(values, k=n))


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float] = median,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile-bootstrap interval of ``stat`` over ``values`` (resampled with replacement)."""
    if not values:
        raise ValueError("bootstrap of no values")
    n = len(values)
    if stat is median and n > 1:
        xs = sorted(values)
        ranks = _median_rank_draws(n, n_boot, seed)
        if n % 2:
            boots = [xs[lo] for lo, _ in ranks]
        else:
            boots = [(xs[lo] + xs[hi]) / 2 for lo, hi in ranks]
    else:
        draw = _resampler(values, stat, random.Random(seed))
        boots = [draw() for _ in range(n_boot)]
    alpha = (1 - level) / 2 * 100
    return Interval(stat(values), percentile(boots, alpha), percentile(boots, 100 - alpha), level)


def ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    stat: Callable[[Sequence[float]], float] = median,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Interval of stat(a) / stat(b), resampling a and b independently."""
    if not a or not b:
        raise ValueError("ratio of an empty sample")
    rng = random.Random(seed)
    draw_a, draw_b = _resampler(a, stat, rng), _resampler(b, stat, rng)
    ratios = []
    for _ in range(n_boot):
        sa = draw_a()
        sb = draw_b()
        if sb:
            ratios.append(sa / sb)
    alpha = (1 - level) / 2 * 100
    est = stat(a) / stat(b)
    return Interval(est, percentile(ratios, alpha), percentile(ratios, 100 - alpha), level)
