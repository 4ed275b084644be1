"""A reference for ``usage``: the same numbers from the ledger's rows, in plain Python —
every row read with SQL, sums as Python integers, percentiles by tui/core/stats.py, and
busy time, joules and covered seconds by sweeping every instant between two events of an
engine (the definition of tui/core/attribution.py, written out once more without numpy).
The tests hold ``usage`` (packs and rows, numpy) equal to it."""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from typing import Any

from tui.core.stats import percentile

_SQL = (
    "SELECT r.id, r.t0, MAX(COALESCE(r.e2e_s, 0), 0), COALESCE(r.upstream, -1), t.text, "
    "r.state, r.prompt_tokens, r.cached_tokens, r.output_tokens, r.output_est, "
    "r.reasoning_tokens, r.reasoning_est, r.ttft_s, r.ttfo_s, r.decode_tps, {verdict} "
    "FROM requests r LEFT JOIN texts t ON t.id = r.client"
)
VERDICTS = (  # tui/core/verdict.py's kinds, written out again
    "failed", "cancelled", "preempted", "queued", "slow-start", "prefill-bound", "cache-hit",
    "spec-slower", "spec-low", "decode-shared", "decode-bound", "unknown",
)  # fmt: skip


def _whole(x: float, unit: float) -> float:
    """A time or rate to the microsecond / thousandth, as usage ranks them."""
    return math.floor(x * unit + 0.5) / unit


def shares(con: sqlite3.Connection) -> dict[int, tuple[float, float, float]]:
    """Every request's (busy, joules, covered) over all the ledger's requests of its
    engine, by a sweep: between two consecutive events, each request in flight gets
    dt / n, and dt · P / n where a span covers it (the span that started first)."""
    rows = con.execute("SELECT id, t0, MAX(COALESCE(e2e_s, 0), 0), COALESCE(upstream, -1) "
                       "FROM requests").fetchall()  # fmt: skip
    out: dict[int, tuple[float, float, float]] = {}
    engines: dict[int, list[tuple[int, float, float]]] = defaultdict(list)
    for rid, t0, e2e, up in rows:
        engines[up].append((rid, t0, t0 + e2e))
        out[rid] = (0.0, 0.0, 0.0)
    for up, reqs in engines.items():
        spans = con.execute(
            "SELECT t0, t1, joules, id FROM energy WHERE upstream = ? ORDER BY t0, id", (up,)
        ).fetchall()
        points = sorted(
            {t for _r, a, b in reqs for t in (a, b)} | {t for s in spans for t in s[:2]}
        )
        acc = {rid: [0.0, 0.0, 0.0] for rid, _a, _b in reqs}
        for a, b in zip(points, points[1:]):
            active = [rid for rid, t0, t1 in reqs if t1 > t0 and t0 <= a and t1 >= b]
            if not active:
                continue
            dt = (b - a) / len(active)
            over = [s for s in spans if s[1] > s[0] and s[0] <= a and s[1] >= b]
            first = min(over, key=lambda s: (s[0], s[3])) if over else None
            for rid in active:
                acc[rid][0] += dt
                if first is not None:
                    acc[rid][1] += dt * first[2] / (first[1] - first[0])
                    acc[rid][2] += dt
        for rid, (busy, joules, covered) in acc.items():
            out[rid] = (busy, joules, covered)
    return out


def reference(
    con: sqlite3.Connection, since: float, until: float, by: str = "client"
) -> dict[str, dict[str, Any]]:
    """Per client label (``by="verdict"``: per verdict kind, ``(none)`` for none or a kind
    not ours), the window's numbers as ``Group.to_dict`` names them."""
    share = shares(con)
    groups: dict[str, dict[str, Any]] = {}
    values: dict[str, dict[str, list[float]]] = {}
    columns = {c[1] for c in con.execute("PRAGMA table_info(requests)")}
    verdict_column = "r.verdict" if "verdict" in columns else "NULL"  # schema 4 added it
    for row in con.execute(_SQL.format(verdict=verdict_column)):
        rid, t0, _e2e, _up, client, state, prompt, cached, output, o_est = row[:10]
        reasoning, r_est, ttft, ttfo, tps, verdict = row[10:]
        if not since <= t0 < until:
            continue
        if by == "verdict":
            key = verdict if verdict in VERDICTS else "(none)"
        else:
            key = client if client is not None else "(none)"
        g = groups.setdefault(key, defaultdict(int))
        v = values.setdefault(key, defaultdict(list))
        g["requests"] += 1
        g["failed"] += state == "failed"
        g["cancelled"] += state == "cancelled"
        g["prompt_tokens"] += prompt or 0
        g["cached_tokens"] += cached or 0
        g["output_tokens"] += output or 0
        g["output_estimated"] += (output or 0) if o_est else 0
        g["reasoning_tokens"] += reasoning or 0
        g["reasoning_estimated"] += (reasoning or 0) if r_est else 0
        busy, joules, covered = share[rid]
        g["busy_s"] += busy
        g["joules_sum"] += joules
        g["covered_sum"] += covered
        for name, x, unit in (("ttft", ttft, 1e6), ("ttfo", ttfo, 1e6), ("tps", tps, 1e3)):
            if x is not None and x >= 0:
                v[name].append(_whole(x, unit))
    out = {}
    for key, g in groups.items():
        d = dict(g)
        v = values[key]
        for field, name, q in (
            ("ttft_p50_s", "ttft", 50), ("ttft_p95_s", "ttft", 95), ("ttfo_p50_s", "ttfo", 50),
            ("ttfo_p95_s", "ttfo", 95), ("decode_tps_p50", "tps", 50),
        ):  # fmt: skip
            d[field] = percentile(v[name], q) if v[name] else None
        covered = d.pop("covered_sum")
        joules = d.pop("joules_sum")
        d["joules"] = joules if covered > 0 else None
        out[key] = d
    return out
