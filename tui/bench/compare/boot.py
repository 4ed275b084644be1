"""The bootstrap distributions behind ``infertop compare``, vectorised with NumPy.

One level's ok requests are resampled with replacement ``n_boot`` times; each resample
gives every compared statistic at once (so the five metrics of a level share the same
resamples), computed exactly as tui.bench.compare.ratios defines it for the whole level:

- decode tok/s, TTFT, TTFO: median over the resample's requests that have the value.
- ITL p50 / p90: the type-7 percentile (tui.core.stats.percentile) of the per-token gaps
  pooled over the resample's requests, a request drawn k times counted k times, each
  gap's value counted for the tokens it stands for (its weight). Found without building
  the pool: all gaps sorted once; a resample's multiplicities times the weights turn into
  a running count along that order, and the order statistics at ⌊r⌋ and ⌊r⌋ + 1 are
  where that count first passes them.
- total tok/s: the measured total × (Σ tokens / Σ request durations of the resample) ÷
  (the same over all the level's requests).

NumPy comes with llama-cpp-python (a dependency of infertop). A resample whose statistic
is undefined (no request with the value) gives NaN and is left out of the interval.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from tui.bench.compare.samples import LevelSample

MAX_CELLS = 2_000_000  # resample indices held at once (rows × requests)


def resampled_statistics(level: LevelSample, n_boot: int, rng: Any) -> dict[str, Any]:
    """metric → array of n_boot resampled values (NumPy arrays; NaN where undefined)."""
    import numpy as np

    reqs = level.requests
    n = len(reqs)
    nan = float("nan")
    decode = np.array([nan if r.decode_tps is None else r.decode_tps for r in reqs], float)
    ttft = np.array([nan if r.ttft_ms is None else r.ttft_ms for r in reqs], float)
    ttfo = np.array([nan if r.ttfo_ms is None else r.ttfo_ms for r in reqs], float)
    # without reasoning TTFO = TTFT, and so are its resamples; with no TTFO (an older
    # report) it stays NaN: neither is worth a median per resample
    own_ttfo = not np.isnan(ttfo).all() and not np.array_equal(ttfo, ttft, equal_nan=True)
    tokens = np.array([r.output_tokens for r in reqs], float)
    busy = np.array([r.duration_s for r in reqs], float)
    whole = tokens.sum() / busy.sum() if busy.sum() > 0 else nan
    gaps = np.array([g for r in reqs for g in r.itl_token_ms], float)
    weights = np.array([w for r in reqs for w in r.itl_weights], np.int64)
    owner = np.repeat(np.arange(n), [len(r.itl_token_ms) for r in reqs])
    order = np.argsort(gaps, kind="stable")
    gaps, owner, weights = gaps[order], owner[order], weights[order]

    out = {m: np.full(n_boot, nan) for m in ("decode_tps", "ttft_ms", "ttfo_ms", "total_tps")}
    out["itl_p50_ms"] = np.full(n_boot, nan)
    out["itl_p90_ms"] = np.full(n_boot, nan)
    rows = max(1, MAX_CELLS // max(n, 1))
    for start in range(0, n_boot, rows):
        k = min(rows, n_boot - start)
        idx = rng.integers(0, n, size=(k, n))
        part = slice(start, start + k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN resample: NaN
            out["decode_tps"][part] = np.nanmedian(decode[idx], axis=1)
            out["ttft_ms"][part] = np.nanmedian(ttft[idx], axis=1)
            if own_ttfo:
                out["ttfo_ms"][part] = np.nanmedian(ttfo[idx], axis=1)
            if level.total_tps is not None and whole > 0:
                rate = tokens[idx].sum(axis=1) / busy[idx].sum(axis=1)
                out["total_tps"][part] = level.total_tps * rate / whole
        if gaps.size:
            for i in range(k):
                counts = np.cumsum(np.bincount(idx[i], minlength=n)[owner] * weights)
                total = int(counts[-1])
                if total == 0:
                    continue
                for q, name in ((50, "itl_p50_ms"), (90, "itl_p90_ms")):
                    out[name][start + i] = _order_percentile(gaps, counts, total, q)
    if not own_ttfo and not np.isnan(ttfo).all():
        out["ttfo_ms"] = out["ttft_ms"].copy()
    return out


def _order_percentile(sorted_values: Any, counts: Any, total: int, q: float) -> float:
    """Type-7 percentile of the multiset whose running count along ``sorted_values`` is
    ``counts`` (``total`` elements)."""
    import numpy as np

    r = (total - 1) * q / 100.0
    lo = math.floor(r)
    hi = min(lo + 1, total - 1)
    # the element at 0-based rank t is the first position whose running count exceeds t
    a, b = np.searchsorted(counts, [lo + 1, hi + 1], side="left")
    va, vb = float(sorted_values[a]), float(sorted_values[b])
    return va + (r - lo) * (vb - va)


def percentile_interval(values: Any, level: float) -> tuple[float | None, float | None]:
    """The central ``level`` percentile interval of the finite values (type 7)."""
    import numpy as np

    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)
