"""What an open-loop level sent, against the arrival process it asked for.

For a level run by tui/bench/run/open_loop.py (``level.arrivals`` set):

- ``asked``: the process, rate, burstiness, ramp, limits and seed (enough to rerun it),
  and the CV the process has by construction (0 constant, 1 Poisson, 1/√k gamma).
- ``scheduled``: :func:`~tui.bench.run.arrivals.arrival_stats` of the generated schedule
  (every arrival planned, on the level's clock).
- ``sent``: the same statistics of the times the requests were really sent (each
  request's RequestSent stamp, on the level's clock), and the lag behind the schedule:
  sent − scheduled per request, ms (p50 / p99 / max). A positive lag is the client or the
  engine's connection set-up running late; a request is never sent early.
- ``in_flight_max`` / ``in_flight_last``: requests in flight, sampled every 0.25 s: a
  number that grows through the level is a queue growing.
"""

from __future__ import annotations

from typing import Any

from tui.bench.run.arrivals import arrival_stats
from tui.bench.run.records import LevelRun
from tui.core.stats import percentile


def arrival_summary(level: LevelRun) -> dict[str, Any]:
    a = level.arrivals or {}
    spec = a.get("spec") or {}
    ramp = float(spec.get("ramp_s") or 0.0)
    scheduled: list[float] = list(a.get("scheduled") or [])
    start = float(a.get("start_s") or 0.0)
    by_index = {r.index: r for r in level.records}
    sent: list[float] = []
    lags: list[float] = []
    for k, i in enumerate(a.get("sent_index") or []):
        r = by_index.get(i)
        if r is None or r.timeline.t_sent_ns is None or k >= len(scheduled):
            continue
        t = r.t_start_s - start
        sent.append(t)
        lags.append((t - scheduled[k]) * 1000.0)
    flight = [n for _t, n in a.get("in_flight") or []]
    return {
        "asked": spec,
        "scheduled": arrival_stats(scheduled, ramp),
        "sent": arrival_stats(sent, ramp),
        "planned": len(scheduled),
        "sent_requests": len(a.get("sent_index") or []),
        "lag_ms": {
            "p50": percentile(lags, 50) if lags else None,
            "p99": percentile(lags, 99) if lags else None,
            "max": max(lags) if lags else None,
        },
        "in_flight_max": max(flight) if flight else None,
        "in_flight_last": flight[-1] if flight else None,
    }
