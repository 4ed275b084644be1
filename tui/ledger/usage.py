"""Usage: the ledger's requests in a time window, grouped, with their totals.

Per group (``by``: any of :data:`DIMENSIONS`, combined; none: one group of everything;
``verdict`` groups by the kind of each request's verdict — tui/core/verdict.py — and
``(none)`` where its place gave none):

- ``requests``, ``failed``, ``cancelled``;
- ``prompt_tokens``, ``cached_tokens`` (the engine's counts: requests whose engine gave
  none add nothing), ``output_tokens`` (engine counts, else counted chunks) with
  ``output_estimated`` the part that was counted, ``reasoning_tokens`` the same way;
- ``ttft_p50_s`` / ``ttft_p95_s`` and ``ttfo_*`` over the group's streamed requests that
  have one, ``decode_tps_p50`` (tui/core/stats.py's percentile, exact: over every
  request's value, times to the microsecond and rates to a thousandth of a token/s);
- ``busy_s``: the sum of the group's requests' busy shares — each request's share of its
  engine's busy time, over every request of that engine the ledger holds — and
  ``joules`` where the ledger holds energy spans for the engine, with
  ``joules_covered_s`` the busy seconds they cover (tui/core/attribution.py).

The window is ``[since, until)`` on the requests' ``t0`` (when each was sent). Its
requests are read as columns (tui/ledger/shares.py): whole hours from the hour packs
(tui/ledger/packs.py: a blob of numbers per hour, read by the hour's key), the hours not
packed yet — the last one or two, as a rule — from the rows through the ``requests_t0``
index; every number is the same either way. The sums, percentiles and shares are numpy
over those columns (tui/ledger/grouping.py). Days and hours are in local time.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from tui.ledger.grouping import (
    group_codes,
    grouped_percentile,
    grouped_sum,
    local_codes,
    percentile_of_all,
)
from tui.ledger.shares import (
    PACKS_SQL,
    READ_SQL,
    SOURCE_CODES,
    VERDICT_CODES,
    Window,
    read_window,
)

Dimension = Literal["client", "model", "route", "upstream", "source", "verdict", "day", "hour"]
DIMENSIONS: Final[tuple[Dimension, ...]] = (
    "client",
    "model",
    "route",
    "upstream",
    "source",
    "verdict",
    "day",
    "hour",
)
_NAMED: Final = frozenset({"client", "model", "route", "upstream"})
# (field of Group's quantiles, column of the window, percentile, unit of the column)
PERCENTILES: Final = (
    ("ttft_s", "ttft_us", 50, 1e6),
    ("ttft_s", "ttft_us", 95, 1e6),
    ("ttfo_s", "ttfo_us", 50, 1e6),
    ("ttfo_s", "ttfo_us", 95, 1e6),
    ("decode_tps", "decode_mtps", 50, 1e3),
)
ATTRIBUTION: Final = (
    "busy_s is an attribution: each instant an engine had requests in flight is split "
    "equally among them (tui/core/attribution.py); a group's busy_s is the sum of its "
    "requests' shares"
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
    busy_wall_s: float  # the busy shares of the window's requests, engines summed

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


def id_of(con: sqlite3.Connection, text: str) -> int | None:
    found = con.execute("SELECT id FROM texts WHERE text = ?", (text,)).fetchone()
    return None if found is None else int(found[0])


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
    return summarize(window_of(con, since, until, upstream), texts_of(con), by)


def window_of(
    con: sqlite3.Connection, since: float, until: float, upstream: str | None = None
) -> Window:
    """The requests of ``[since, until)`` (of ``upstream`` only, if given) as columns."""
    found = None
    if upstream is not None:
        found = id_of(con, upstream)
        if found is None:
            found = -2  # a server the ledger never saw: nothing
    return read_window(con, since, until, found)


def dimension(window: Window, d: Dimension) -> Any:
    """Each request's value in dimension ``d``: a name's id, a source's or verdict's
    code, a local day (YYYYMMDD) or hour (YYYYMMDDHH)."""
    if d in ("day", "hour"):
        return local_codes(window.cols["t0"], d)
    return window.cols[d]


def summarize(window: Window, names: dict[int, str], by: Sequence[Dimension]) -> Usage:
    """The groups of ``window`` by ``by`` (see the module docstring)."""
    c = window.cols
    dims = tuple(by)
    n = len(c)
    total = Group(())
    if not n:
        return Usage(window.since, window.until, dims, [], total, 0.0)
    codes, keys = group_codes([dimension(window, d) for d in dims], n)
    groups = [Group(_label(dims, k, names)) for k in keys]
    _sums(c, codes, groups, total)
    _percentiles(c, codes, groups, total)
    _shares(c, codes, groups, total)
    ordered = sorted(groups, key=lambda g: (-g.output_tokens - g.prompt_tokens, g.key))
    return Usage(window.since, window.until, dims, ordered, total, total.busy_s)


def _sums(c: Any, codes: Any, groups: list[Group], total: Group) -> None:
    import numpy as np

    n_keys = len(groups)
    flags = c["flags"]
    state = flags & 3
    sums: dict[str, Callable[[], list[int]]] = {
        "requests": lambda: [int(x) for x in np.bincount(codes, minlength=n_keys)],
        "failed": lambda: grouped_sum(codes, state == 1, n_keys),
        "cancelled": lambda: grouped_sum(codes, state == 2, n_keys),
        "prompt_tokens": lambda: grouped_sum(codes, c["prompt"], n_keys),
        "cached_tokens": lambda: grouped_sum(codes, c["cached"], n_keys),
        "output_tokens": lambda: grouped_sum(codes, c["output"], n_keys),
        "output_estimated": lambda: grouped_sum(codes, np.where(flags & 4, c["output"], 0), n_keys),
        "reasoning_tokens": lambda: grouped_sum(codes, c["reasoning"], n_keys),
        "reasoning_estimated": lambda: grouped_sum(
            codes, np.where(flags & 8, c["reasoning"], 0), n_keys
        ),
    }
    zero = {"cached_tokens": "cached", "reasoning_tokens": "reasoning"}
    zero["reasoning_estimated"] = "reasoning"
    for name, count in sums.items():
        per = [0] * n_keys if name in zero and c.zero(zero[name]) else count()
        for g, v in zip(groups, per):
            setattr(g, name, v)
        setattr(total, name, sum(per))


def _percentiles(c: Any, codes: Any, groups: list[Group], total: Group) -> None:
    import numpy as np

    found: dict[str, Any] = {}
    for column in dict.fromkeys(col for _f, col, _q, _u in PERCENTILES):
        wanted = [(f, q, u) for f, col, q, u in PERCENTILES if col == column]
        qs, unit = [q for _f, q, _u in wanted], wanted[0][2]
        if column == "ttfo_us" and np.array_equal(c["ttfo_us"], c["ttft_us"]):
            found[column] = found["ttft_us"]  # nothing came before the first token: the same
        else:
            found[column] = (
                grouped_percentile(codes, c[column], qs, len(groups), unit),
                percentile_of_all(c[column], qs, unit),
            )
        per_group, every = found[column]
        for (f, q, _u), values, whole in zip(wanted, per_group, every):
            for g, v in zip(groups, values.tolist()):
                if v == v:  # not NaN
                    g.quantiles[(f, q)] = v
            if whole is not None:
                total.quantiles[(f, q)] = whole


def _shares(c: Any, codes: Any, groups: list[Group], total: Group) -> None:
    import numpy as np

    n_keys = len(groups)
    busy = np.bincount(codes, c["busy"], n_keys)
    for g, b in zip(groups, busy.tolist()):
        g.busy_s = b
    total.busy_s = sum(g.busy_s for g in groups)
    if c.zero("covered"):
        return
    joules = np.bincount(codes, c["joules"], n_keys)
    covered = np.bincount(codes, c["covered"], n_keys)
    for g, j, s in zip(groups, joules.tolist(), covered.tolist()):
        if s > 0:
            g.joules, g.joules_covered_s = j, s
    with_joules = [g for g in groups if g.joules is not None]
    if with_joules:
        total.joules = sum(g.joules or 0.0 for g in with_joules)
        total.joules_covered_s = sum(g.joules_covered_s for g in with_joules)


def _label(dims: Sequence[Dimension], key: Any, names: dict[int, str]) -> tuple[str, ...]:
    out = []
    for d, v in zip(dims, (int(x) for x in key)):
        if d in _NAMED:
            out.append(names.get(v, "(unknown)") if v >= 0 else "(none)")
        elif d == "source":
            out.append(SOURCE_CODES[v] if 0 <= v < len(SOURCE_CODES) else "(other)")
        elif d == "verdict":
            out.append(VERDICT_CODES[v] if 0 <= v < len(VERDICT_CODES) else "(none)")
        elif d == "day":
            out.append(f"{v // 10000:04d}-{v // 100 % 100:02d}-{v % 100:02d}")
        else:
            day = v // 100
            out.append(
                f"{day // 10000:04d}-{day // 100 % 100:02d}-{day % 100:02d} {v % 100:02d}:00"
            )
    return tuple(out)


def query_plan(con: sqlite3.Connection) -> list[str]:
    """SQLite's plans for a window's reads (docs/ledger.md shows them): the packs by
    their hour key, the hours not packed by the ``requests_t0`` index — never a scan."""
    plans = []
    for what, sql, args in (
        ("packs", PACKS_SQL, (0, 1, 0)),
        ("rows", READ_SQL, (0.0, 1.0)),
    ):  # fmt: skip
        rows = con.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall()
        plans.append(f"{what}: " + "; ".join(str(r[-1]) for r in rows))
    return plans
