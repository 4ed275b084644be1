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
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from tui.core.attribution import attribute
from tui.core.stats import percentile

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
_NAME_COLUMNS: Final[dict[str, str]] = {
    "client": "client",
    "model": "model",
    "route": "route",
    "upstream": "upstream",
}
_SELECT: Final = (
    "SELECT client, model, route, upstream, source, t0, e2e_s, state, prompt_tokens, "
    "cached_tokens, output_tokens, output_est, reasoning_tokens, reasoning_est, ttft_s, "
    "ttfo_s, decode_tps FROM requests WHERE t0 >= ? AND t0 < ?"
)
ATTRIBUTION: Final = (
    "busy_s is an attribution: each instant an engine had requests in flight is split "
    "equally among them (tui/core/attribution.py)"
)


@dataclass
class Group:
    """One group's sums and the values its percentiles are taken over."""

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
    ttft: list[float] = field(default_factory=list)
    ttfo: list[float] = field(default_factory=list)
    decode: list[float] = field(default_factory=list)

    def to_dict(self, by: Sequence[str]) -> dict[str, Any]:
        d: dict[str, Any] = dict(zip(by, self.key))
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
            ttft_p50_s=_p(self.ttft, 50),
            ttft_p95_s=_p(self.ttft, 95),
            ttfo_p50_s=_p(self.ttfo, 50),
            ttfo_p95_s=_p(self.ttfo, 95),
            decode_tps_p50=_p(self.decode, 50),
            busy_s=self.busy_s,
            joules=self.joules,
            joules_covered_s=self.joules_covered_s if self.joules is not None else None,
        )
        return d


def _p(values: list[float], q: float) -> float | None:
    return percentile(values, q) if values else None


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


def _label(dim: Dimension, row: Sequence[Any], names: dict[int, str]) -> str:
    if dim in _NAME_COLUMNS:
        i = row[("client", "model", "route", "upstream").index(dim)]
        return names.get(i, "(unknown)") if i is not None else "(none)"
    if dim == "source":
        return str(row[4])
    t = time.localtime(float(row[5]))
    return time.strftime("%Y-%m-%d" if dim == "day" else "%Y-%m-%d %H:00", t)


def usage(
    con: sqlite3.Connection,
    since: float,
    until: float | None = None,
    by: Sequence[Dimension] = ("client",),
    upstream: str | None = None,
) -> Usage:
    """The usage of ``[since, until)`` grouped ``by`` (see the module docstring);
    ``upstream``: that server's requests only."""
    until = time.time() if until is None else until
    names = texts_of(con)
    sql, args = _SELECT, [since, until]
    if upstream is not None:
        found = next((i for i, t in names.items() if t == upstream), None)
        sql += " AND upstream = ?"
        args.append(found if found is not None else -1)
    dims = tuple(by)
    groups: dict[tuple[str, ...], Group] = {}
    total = Group(())
    windows: dict[int | None, list[tuple[float, float, tuple[str, ...]]]] = defaultdict(list)
    for row in con.execute(sql, args):
        key = tuple(_label(d, row, names) for d in dims)
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(key)
        _add(g, row)
        _add(total, row)
        t0, e2e = float(row[5]), row[6]
        windows[row[3]].append((t0, t0 + (float(e2e) if e2e is not None else 0.0), key))
    wall = 0.0
    for engine, spans in windows.items():
        energy = _energy(con, engine, since, until)
        got = attribute(spans, energy)
        wall += got.wall_s
        for key, seconds in got.busy.items():
            groups[key].busy_s += seconds
            total.busy_s += seconds
        for key, joules in got.joules.items():
            for g in (groups[key], total):
                g.joules = (g.joules or 0.0) + joules
                g.joules_covered_s += got.covered[key]
    ordered = sorted(groups.values(), key=lambda g: (-g.output_tokens - g.prompt_tokens, g.key))
    return Usage(since, until, dims, ordered, total, wall)


def _add(g: Group, row: Sequence[Any]) -> None:
    (_c, _m, _r, _u, _s, _t0, _e2e, state, prompt, cached, out, out_est, reason, reason_est,
     ttft, ttfo, decode) = row  # fmt: skip
    g.requests += 1
    if state == "failed":
        g.failed += 1
    elif state == "cancelled":
        g.cancelled += 1
    if prompt is not None:
        g.prompt_tokens += prompt
    if cached is not None:
        g.cached_tokens += cached
    if out is not None:
        g.output_tokens += out
        if out_est:
            g.output_estimated += out
    if reason is not None:
        g.reasoning_tokens += reason
        if reason_est:
            g.reasoning_estimated += reason
    if ttft is not None:
        g.ttft.append(ttft)
    if ttfo is not None:
        g.ttfo.append(ttfo)
    if decode is not None:
        g.decode.append(decode)


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


QUERY_PLAN_SQL: Final = _SELECT


def query_plan(con: sqlite3.Connection) -> list[str]:
    """SQLite's plan for the window's read (docs/ledger.md shows it)."""
    rows = con.execute("EXPLAIN QUERY PLAN " + _SELECT, (0.0, 1.0)).fetchall()
    return [str(r[-1]) for r in rows]
