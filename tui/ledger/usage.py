"""Usage: the ledger's requests in a time window, grouped, with their totals.

Per group (``by``: any of :data:`DIMENSIONS`, combined; none: one group of everything):

- ``requests``, ``failed``, ``cancelled``;
- ``prompt_tokens``, ``cached_tokens`` (the engine's counts: requests whose engine gave
  none add nothing), ``output_tokens`` (engine counts, else counted chunks) with
  ``output_estimated`` the part that was counted, ``reasoning_tokens`` the same way;
- ``ttft_p50_s`` / ``ttft_p95_s`` and ``ttfo_*`` over the group's streamed requests that
  have one, ``decode_tps_p50`` (tui/core/stats.py's percentile);
- ``busy_s``: the engine's busy time attributed to the group, and ``joules`` where the
  ledger holds energy spans for the engine, with ``joules_covered_s`` the busy seconds
  they cover — both by tui/core/attribution.py's definition, each engine (upstream)
  apart, over the requests sent within the window.

The window is ``[since, until)`` on the requests' ``t0`` (when each was sent), read
through the ``requests_t0`` index: the cost follows the requests in the window, not
the file's size. Days and hours are in local time.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from tui.core.attribution import attribute_codes

Dimension = Literal["client", "model", "route", "upstream", "source", "day", "hour"]
DIMENSIONS: Final[tuple[Dimension, ...]] = (
    "client",
    "model",
    "route",
    "upstream",
    "source",
    "day",
    "hour",
)
# each dimension as an integer SQL expression over ``requests`` (names: their ids in
# ``texts``; a day as YYYYMMDD, an hour as YYYYMMDDHH, local time)
SOURCE_CODES: Final = ("proxy", "chat", "run", "bench")
KEY_SQL: Final[dict[str, str]] = {
    "client": "COALESCE(client, -1)",
    "model": "COALESCE(model, -1)",
    "route": "COALESCE(route, -1)",
    "upstream": "COALESCE(upstream, -1)",
    "source": "CASE source "
    + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(SOURCE_CODES))
    + " ELSE -1 END",
    "day": "CAST(strftime('%Y%m%d', t0, 'unixepoch', 'localtime') AS INTEGER)",
    "hour": "CAST(strftime('%Y%m%d%H', t0, 'unixepoch', 'localtime') AS INTEGER)",
}
_NAMED: Final = frozenset({"client", "model", "route", "upstream"})
# the per-request columns read (each as one text of integers: group_concat); times in
# microseconds (t0 and t1 from the window's start: ?3), decode rates in thousandths
US: Final = 1_000_000
_COLUMNS: Final = (
    ("t0", "CAST(ROUND((t0 - ?3) * 1e6) AS INTEGER)"),
    ("t1", "CAST(ROUND((t0 + COALESCE(e2e_s, 0) - ?3) * 1e6) AS INTEGER)"),
    # failed 1, cancelled 2; + 4 when the output count is an estimate, + 8 the reasoning's
    (
        "flags",
        "CASE state WHEN 'failed' THEN 1 WHEN 'cancelled' THEN 2 ELSE 0 END "
        "+ 4 * COALESCE(output_est, 0) + 8 * COALESCE(reasoning_est, 0)",
    ),
    ("prompt", "COALESCE(prompt_tokens, 0)"),
    ("cached", "COALESCE(cached_tokens, 0)"),
    ("output", "COALESCE(output_tokens, 0)"),
    ("reasoning", "COALESCE(reasoning_tokens, 0)"),
    ("ttft_s", "COALESCE(CAST(ROUND(ttft_s * 1e6) AS INTEGER), -1)"),
    ("ttfo_s", "COALESCE(CAST(ROUND(ttfo_s * 1e6) AS INTEGER), -1)"),
    ("decode_tps", "COALESCE(CAST(ROUND(decode_tps * 1e3) AS INTEGER), -1)"),
)
PERCENTILES: Final = (
    ("ttft_s", 50),
    ("ttft_s", 95),
    ("ttfo_s", 50),
    ("ttfo_s", 95),
    ("decode_tps", 50),
)
ATTRIBUTION: Final = (
    "busy_s is an attribution: each instant an engine had requests in flight is split "
    "equally among them (tui/core/attribution.py)"
)


@dataclass
class Group:
    """One group's sums, percentiles and attributed busy time (see the module docstring)."""

    key: tuple[str, ...]
    requests: int = 0
    failed: int = 0
    cancelled: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    output_estimated: int = 0
    reasoning_tokens: int = 0
    reasoning_estimated: int = 0
    busy_s: float = 0.0
    joules: float | None = None
    joules_covered_s: float = 0.0
    quantiles: dict[tuple[str, int], float] = field(default_factory=dict)

    def to_dict(self, by: Sequence[str]) -> dict[str, Any]:
        d: dict[str, Any] = dict(zip(by, self.key))
        q = self.quantiles.get
        d.update(
            requests=self.requests,
            failed=self.failed,
            cancelled=self.cancelled,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            output_tokens=self.output_tokens,
            output_estimated=self.output_estimated,
            reasoning_tokens=self.reasoning_tokens,
            reasoning_estimated=self.reasoning_estimated,
            ttft_p50_s=q(("ttft_s", 50)),
            ttft_p95_s=q(("ttft_s", 95)),
            ttfo_p50_s=q(("ttfo_s", 50)),
            ttfo_p95_s=q(("ttfo_s", 95)),
            decode_tps_p50=q(("decode_tps", 50)),
            busy_s=self.busy_s,
            joules=self.joules,
            joules_covered_s=self.joules_covered_s if self.joules is not None else None,
        )
        return d


@dataclass
class Usage:
    since: float
    until: float
    by: tuple[Dimension, ...]
    groups: list[Group]
    total: Group
    busy_wall_s: float  # time at least one request was in flight, engines summed

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since,
            "until": self.until,
            "by": list(self.by),
            "groups": [g.to_dict(self.by) for g in self.groups],
            "total": self.total.to_dict(()),
            "busy_wall_s": self.busy_wall_s,
            "attribution": ATTRIBUTION,
        }


def texts_of(con: sqlite3.Connection) -> dict[int, str]:
    return {int(i): str(t) for i, t in con.execute("SELECT id, text FROM texts")}


def usage(
    con: sqlite3.Connection,
    since: float,
    until: float | None = None,
    by: Sequence[Dimension] = ("client",),
    upstream: str | None = None,
) -> Usage:
    """The usage of ``[since, until)`` grouped ``by`` (see the module docstring);
    ``upstream``: that server's requests only.

    One SQL statement reads the window through the ``requests_t0`` index and hands its
    requests over as one text of integers per column (``group_concat``: no Python object
    per request, no sort; times to the microsecond, rates to a thousandth of a token per
    second), which numpy reads; the sums, the percentiles (:func:`grouped_percentile`)
    and the busy time (tui/core/attribution.py) are taken over those arrays."""
    import numpy as np

    until = time.time() if until is None else until
    names = texts_of(con)
    where, args = "t0 >= ?1 AND t0 < ?2", [since, until, since]
    if upstream is not None:
        found = next((i for i, t in names.items() if t == upstream), None)
        where += " AND upstream = ?4"
        args.append(found if found is not None else -1)
    dims = tuple(by)
    parts = ["COALESCE(upstream, -1)", *(KEY_SQL[d] for d in dims)]
    parts += [expr for _n, expr in _COLUMNS]
    sql = f"SELECT {', '.join(f'group_concat({e})' for e in parts)} FROM requests WHERE {where}"
    texts = con.execute(sql, args).fetchone()
    chunks: list[tuple[Any, Any]] = []  # (upstream id, matrix: one row per column)
    if texts and texts[0]:
        # integers parse ~15× faster than floats (every column is one: see _COLUMNS)
        ints = np.vstack([np.fromstring(text, dtype=np.int64, sep=",") for text in texts])
        engines = ints[0]
        cols_all = ints[1:].astype(np.float64)
        if engines.min() != engines.max():  # each upstream's requests together
            order = np.argsort(engines, kind="stable")
            cols_all, engines = cols_all[:, order], engines[order]
        cut = np.flatnonzero(np.diff(engines)) + 1
        for block in np.split(np.arange(len(engines)), cut):
            engine = int(engines[block[0]])
            chunks.append((engine if engine >= 0 else None, cols_all[:, block]))
    total = Group(())
    if not chunks:
        return Usage(since, until, dims, [], total, 0.0)
    cols = np.hstack([m for _u, m in chunks])
    nd = len(dims)
    keys, codes = np.unique(cols[:nd].T.astype(np.int64), axis=0, return_inverse=True)
    codes = codes.reshape(-1)
    n_keys = len(keys)
    c = {name: cols[nd + i] for i, (name, _e) in enumerate(_COLUMNS)}
    for name, unit in (("t0", US), ("t1", US), ("ttft_s", US), ("ttfo_s", US), ("decode_tps", 1e3)):
        c[name] = np.where(c[name] >= 0, c[name] / unit, -1.0)
    groups = [Group(_label(dims, k, names)) for k in keys]
    _sums(groups, total, codes, n_keys, c)
    for column in dict.fromkeys(name for name, _q in PERCENTILES):
        qs = [q for name, q in PERCENTILES if name == column]
        per = grouped_percentile(codes, c[column], qs, n_keys)
        every = grouped_percentile(np.zeros(len(codes), np.int64), c[column], qs, 1)
        for q, values, whole in zip(qs, per, every):
            for g, v in zip(groups, values):
                if not np.isnan(v):
                    g.quantiles[(column, q)] = float(v)
            if not np.isnan(whole[0]):
                total.quantiles[(column, q)] = float(whole[0])
    wall = 0.0
    start = 0
    for engine, matrix in chunks:  # each upstream's own busy time
        n = matrix.shape[1]
        part = slice(start, start + n)
        start += n
        energy = [(a - since, b - since, j) for a, b, j in _energy(con, engine, since, until)]
        got = attribute_codes(c["t0"][part], c["t1"][part], codes[part], n_keys, energy)
        wall += got.wall_s
        for i, g in enumerate(groups):
            g.busy_s += float(got.busy[i])
            if got.covered[i] > 0:
                g.joules = (g.joules or 0.0) + float(got.joules[i])
                g.joules_covered_s += float(got.covered[i])
    total.busy_s = sum(g.busy_s for g in groups)
    covered = [g for g in groups if g.joules is not None]
    if covered:
        total.joules = sum(g.joules or 0.0 for g in covered)
        total.joules_covered_s = sum(g.joules_covered_s for g in covered)
    ordered = sorted(groups, key=lambda g: (-g.output_tokens - g.prompt_tokens, g.key))
    return Usage(since, until, dims, ordered, total, wall)


def _label(dims: Sequence[Dimension], key: Any, names: dict[int, str]) -> tuple[str, ...]:
    out = []
    for d, v in zip(dims, (int(x) for x in key)):
        if d in _NAMED:
            out.append(names.get(v, "(unknown)") if v >= 0 else "(none)")
        elif d == "source":
            out.append(SOURCE_CODES[v] if 0 <= v < len(SOURCE_CODES) else "(other)")
        elif d == "day":
            out.append(f"{v // 10000:04d}-{v // 100 % 100:02d}-{v % 100:02d}")
        else:
            day = v // 100
            out.append(
                f"{day // 10000:04d}-{day // 100 % 100:02d}-{day % 100:02d} {v % 100:02d}:00"
            )
    return tuple(out)


def _sums(groups: list[Group], total: Group, codes: Any, n: int, c: dict[str, Any]) -> None:
    import numpy as np

    def per(values: Any) -> list[int]:
        return [int(round(x)) for x in np.bincount(codes, values, n)]

    flags = c["flags"].astype(np.int64)
    state = flags & 3
    columns = {
        "requests": per(np.ones(len(codes))),
        "failed": per(state == 1),
        "cancelled": per(state == 2),
        "prompt_tokens": per(c["prompt"]),
        "cached_tokens": per(c["cached"]),
        "output_tokens": per(c["output"]),
        "output_estimated": per(c["output"] * ((flags & 4) > 0)),
        "reasoning_tokens": per(c["reasoning"]),
        "reasoning_estimated": per(c["reasoning"] * ((flags & 8) > 0)),
    }
    for name, values in columns.items():
        for g, v in zip(groups, values):
            setattr(g, name, v)
        setattr(total, name, sum(values))


def grouped_percentile(codes: Any, values: Any, qs: Sequence[float], n: int) -> list[Any]:
    """For each q of ``qs``, the q-th percentile of ``values`` per group code (0..n-1; a
    negative value: none), NaN for a group with none — tui/core/stats.py's definition
    (type 7: x[⌊r⌋] + (r − ⌊r⌋)(x[⌊r⌋+1] − x[⌊r⌋]), r = (k − 1)·q/100 over a group's k
    sorted values), every group at once from one sort (tests hold the two equal)."""
    import numpy as np

    keep = values >= 0
    cs, vs = codes[keep], values[keep]
    vs = vs[np.lexsort((vs, cs))] if n > 1 else np.sort(vs)
    counts = np.bincount(cs, minlength=n)
    starts = np.cumsum(counts) - counts
    has = counts > 0
    base = starts[has]
    out = []
    for q in qs:
        row = np.full(n, np.nan)
        r = (counts[has] - 1) * q / 100.0
        lo = np.floor(r).astype(np.int64)
        hi = np.minimum(lo + 1, counts[has] - 1)
        low, high = vs[base + lo], vs[base + hi]
        row[has] = low + (r - lo) * (high - low)
        out.append(row)
    return out


def _energy(
    con: sqlite3.Connection, upstream: int | None, since: float, until: float
) -> list[tuple[float, float, float]]:
    if upstream is None:
        return []
    rows = con.execute(
        "SELECT t0, t1, joules FROM energy WHERE upstream = ? AND t0 < ? AND t1 > ? ORDER BY t0",
        (upstream, until, since),
    )
    spans: list[tuple[float, float, float]] = []
    end = -1.0
    for t0, t1, joules in rows:
        if t0 >= end:  # spans of two writers may overlap: the first one stands
            spans.append((float(t0), float(t1), float(joules)))
            end = float(t1)
    return spans


def query_plan(con: sqlite3.Connection, by: Sequence[Dimension] = ("client",)) -> list[str]:
    """SQLite's plan for the window's read (docs/ledger.md shows it): an index search."""
    parts = ["COALESCE(upstream, -1)", *(KEY_SQL[d] for d in by)]
    parts += [expr for _n, expr in _COLUMNS]
    sql = f"SELECT {', '.join(f'group_concat({e})' for e in parts)} FROM requests "
    sql += "WHERE t0 >= ?1 AND t0 < ?2"
    rows = con.execute("EXPLAIN QUERY PLAN " + sql, (0.0, 1.0, 0.0)).fetchall()
    return [str(r[-1]) for r in rows]
