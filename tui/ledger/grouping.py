"""Grouping a window's columns (tui/ledger/shares.py's :class:`~.shares.Window`): group
codes for any combination of dimensions, exact integer sums and exact percentiles per
group — numpy over arrays, no Python object per request.

- :func:`group_codes`: each request's group (0..n-1) and each group's key;
- :func:`grouped_sum`: integer sums per group, exact whatever the values (float
  weights only where every partial sum is below 2**53, else integer adds);
- :func:`grouped_percentile`: tui/core/stats.py's percentile (type 7) per group, every
  group from one sort of (group, value) packed into one int64;
- :func:`local_codes`: a request's local day (YYYYMMDD) or hour (YYYYMMDDHH) — the C
  library's local time, as SQLite's ``'localtime'`` is, an hour that holds a change of
  offset (daylight saving) converted request by request.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any, Final

_EXACT: Final = 2**53
_VALUE_BITS: Final = 41  # a percentile's values (µs, thousandths) packed below the group


def dense(values: Any) -> tuple[Any, Any]:
    """The distinct ``values`` (ascending) and each value's index among them — by a
    count over their range where it is small, else by a sort."""
    import numpy as np

    if not len(values):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < 4 * len(values) + 4096:
        shifted = np.subtract(values, lo, dtype=np.int64)
        present = np.bincount(shifted, minlength=hi - lo + 1) > 0
        index = np.cumsum(present) - 1
        return np.flatnonzero(present) + lo, index[shifted]
    uniq, inverse = np.unique(values, return_inverse=True)
    return uniq, inverse.reshape(-1)


def local_codes(t0: Any, unit: str) -> Any:
    """Each time's local day as YYYYMMDD (``unit`` "day") or hour as YYYYMMDDHH."""
    import numpy as np

    hours, at = dense(np.floor_divide(t0, 3600).astype(np.int64))
    offset = np.zeros(len(hours))
    mixed = []
    for i, h in enumerate(hours.tolist()):
        a = time.localtime(h * 3600).tm_gmtoff
        offset[i] = a
        if time.localtime(h * 3600 + 3599).tm_gmtoff != a:
            mixed.append(i)
    local = t0 + offset[at]
    for i in mixed:
        idx = np.flatnonzero(at == i)
        local[idx] = [t + time.localtime(t).tm_gmtoff for t in t0[idx].tolist()]
    day = np.floor_divide(local, 86_400).astype(np.int64)
    days, at_day = dense(day)
    epoch = date(1970, 1, 1)
    ymd = np.array(
        [
            (d.year * 10_000 + d.month * 100 + d.day)
            for d in (epoch + timedelta(int(x)) for x in days)
        ],
        np.int64,
    )
    if unit == "day":
        return ymd[at_day]
    hour = np.floor_divide(local - day * 86_400, 3600).astype(np.int64)
    return ymd[at_day] * 100 + hour


def group_codes(columns: Sequence[Any], n: int) -> tuple[Any, list[tuple[int, ...]]]:
    """Each of the ``n`` requests' group code over the combination of ``columns`` (one
    integer array per dimension; none: one group), and each group's key (its value in
    every column), groups in ascending order of their keys."""
    import numpy as np

    codes = np.zeros(n, np.int64)
    key_columns: list[Any] = []
    for values in columns:
        uniq, at = dense(values)
        if not key_columns:  # the first: its own codes
            codes, key_columns = at, [uniq]
            continue
        groups, codes = dense(codes * len(uniq) + at)  # codes stay below n
        key_columns = [k[groups // len(uniq)] for k in key_columns] + [uniq[groups % len(uniq)]]
    if not key_columns:
        return codes, [()] if n else []
    return codes, list(zip(*(k.tolist() for k in key_columns)))


def grouped_sum(codes: Any, values: Any, n: int) -> list[int]:
    """Per group code (0..n-1), the sum of the integer ``values`` — exact."""
    import numpy as np

    if not len(values):
        return [0] * n
    top = max(int(values.max()), -int(values.min())) * len(values)
    if top == 0:
        return [0] * n
    if top < _EXACT:  # every partial sum is an integer a float holds exactly
        return [int(x) for x in np.rint(np.bincount(codes, values.astype(np.float64), n))]
    out = np.zeros(n, np.int64 if top < 2**62 else object)
    np.add.at(out, codes, values if top < 2**62 else values.astype(object))
    return [int(x) for x in out]


def grouped_percentile(
    codes: Any, values: Any, qs: Sequence[float], n: int, unit: float
) -> list[Any]:
    """For each q of ``qs``, the q-th percentile of ``values`` / ``unit`` per group code
    (0..n-1; a negative value: none), NaN for a group with none — tui/core/stats.py's
    definition (type 7: x[⌊r⌋] + (r − ⌊r⌋)(x[⌊r⌋+1] − x[⌊r⌋]), r = (k − 1)·q/100 over a
    group's k sorted values), every group from one sort of (group, value) packed in
    one int64, read only where a percentile needs it."""
    import numpy as np

    if len(values) and values.min() < 0:
        keep = values >= 0
        codes, values = codes[keep], values[keep]
    if not len(values):
        return [np.full(n, np.nan) for _q in qs]
    if n < 2 ** (62 - _VALUE_BITS) and int(values.max()) < 2**_VALUE_BITS:
        ordered = codes << _VALUE_BITS
        ordered |= values
        ordered.sort()
        mask = 2**_VALUE_BITS - 1
    else:  # values past 25 days in µs (a hostile rate), or millions of groups
        ordered, mask = values[np.lexsort((values, codes))], -1
    counts = np.bincount(codes, minlength=n)
    has = counts > 0
    base = (np.cumsum(counts) - counts)[has]
    out = []
    for q in qs:
        row = np.full(n, np.nan)
        r = (counts[has] - 1) * q / 100.0
        lo = np.floor(r).astype(np.int64)
        hi = np.minimum(lo + 1, counts[has] - 1)
        low = (ordered[base + lo] & mask) / unit
        high = (ordered[base + hi] & mask) / unit
        row[has] = low + (r - lo) * (high - low)
        out.append(row)
    return out


def percentile_of_all(values: Any, qs: Sequence[float], unit: float) -> list[float | None]:
    """The same definition over every value at once (a partition, not a sort)."""
    import numpy as np

    vs = values[values >= 0] if len(values) and values.min() < 0 else values
    k = len(vs)
    if not k:
        return [None for _q in qs]
    picks = []
    for q in qs:
        r = (k - 1) * q / 100.0
        lo = int(np.floor(r))
        picks.append((r, lo, min(lo + 1, k - 1)))
    kth = sorted({i for _r, lo, hi in picks for i in (lo, hi)})
    part = np.partition(vs, kth)
    x = {i: float(part[i]) / unit for i in kth}
    return [x[lo] + (r - lo) * (x[hi] - x[lo]) for r, lo, hi in picks]
