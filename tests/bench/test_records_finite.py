"""report.json has no NaN/inf: ``finite`` replaces them with None at any depth, and keeps
every other value (its fast path for all-number lists included)."""

from __future__ import annotations

import math

from tui.bench.run.records import finite


def test_nan_and_inf_become_none_everywhere_and_nothing_else_changes() -> None:
    nan, inf = float("nan"), float("inf")
    data = {
        "gaps": [1.5, 2.0, 3],  # numbers only, all finite: kept as they are
        "bad": [1.0, nan, -inf, 2],  # numbers with NaN/inf: only those become None
        "mixed": [1.0, None, "x", [inf, 2.0]],  # not all numbers: value by value
        "big": [10**400, 1.0],  # an int no float can hold: kept
        "one": inf,
        "tuple": (nan, 1.0),
        "flags": [True, False],
    }
    out = finite(data)
    assert out["gaps"] == [1.5, 2.0, 3]
    assert out["bad"] == [1.0, None, None, 2]
    assert out["mixed"] == [1.0, None, "x", [None, 2.0]]
    assert out["big"] == [10**400, 1.0]
    assert out["one"] is None and out["tuple"] == [None, 1.0] and out["flags"] == [True, False]
    assert math.isfinite(finite(2.5)) and finite(nan) is None
