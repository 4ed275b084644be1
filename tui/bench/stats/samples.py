"""Per-request values of a level and their medians with bootstrap intervals: what every
summary (levels, depth, comparisons) is built from."""

from __future__ import annotations

from typing import Any

from tui.bench.run.records import RequestRecord
from tui.core.stats import Interval, bootstrap_ci, median

N_BOOT = 2000


def metric_values(records: list[RequestRecord], name: str) -> list[float]:
    """Per-request values of one metric over ok requests (None skipped)."""
    out: list[float] = []
    for r in records:
        if not r.ok:
            continue
        m = r.metrics
        v = m.itl_ms_p50 if name == "itl_ms" else getattr(m, name)
        if v is not None:
            out.append(float(v))
    return out


def interval_dict(
    values: list[float], seed: int = 0, n_boot: int = N_BOOT
) -> dict[str, Any] | None:
    if not values:
        return None
    if len(values) < 2:
        return {"estimate": values[0], "low": None, "high": None, "n": 1}
    iv: Interval = bootstrap_ci(values, median, n_boot=n_boot, seed=seed)
    return {"estimate": iv.estimate, "low": iv.low, "high": iv.high, "n": len(values)}
