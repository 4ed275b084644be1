"""A window's requests as columns — from the hour packs where an hour is packed, from the
rows (their busy shares computed then) where it is not — and the packing itself.

**Busy shares over the whole ledger.** A request's busy share (tui/core/attribution.py)
is taken over every request of its engine the ledger holds, not only those of the window
a report asks for: it is a number of the request's own, the same in every window, and a
window's busy time is the sum of its requests' shares. It depends on the requests in
flight with it, and on those alone: :func:`build` reads, beside the requests of
``[lo, hi)``, every row whose window can overlap theirs — back to the first hour whose
latest end (``hours.reach``) passes ``lo``, on to the latest end of theirs.

**Packing** (:func:`pack_due`): an hour is packed once it has ended and no request of it
ended within :data:`LAG_S` — by then the requests in flight with its own have, as a
rule, ended and been written. A request that ends later (a stream longer than the lag)
drops the packs it overlaps when it is written (the triggers of tui/ledger/store.py), and
those hours are packed again: a pack is never stale. Each run of hours is packed in one
``BEGIN IMMEDIATE`` transaction (rows read, shares computed, packs written), so no row
can change in between, whichever process writes.

**Reading** (:func:`read_window`): in one read transaction (one snapshot of the file,
however many processes write meanwhile), the packs of the window's hours, then every
hour that holds requests and no pack from the rows — the current hour and the lag before
it, as a rule. Packs of the window's first and last hour keep only the requests inside.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from tui.core.attribution import request_shares
from tui.core.verdict import VERDICT_KINDS
from tui.ledger import packs
from tui.ledger.packs import FORMAT, HOUR_S, hour_of

LAG_S: Final = 600.0
PACK_RUN_HOURS: Final = 24  # hours packed in one transaction, at most
PACK_RUN_S: Final = 0.25  # and about this long
SOURCE_CODES: Final = ("proxy", "chat", "run", "bench")
# a verdict's code in packs and windows: 0 none (or a kind not ours), else 1 + its index
VERDICT_CODES: Final = ("(none)", *VERDICT_KINDS)

# the numbers of a request as packs keep them (tui/ledger/packs.py's FIELDS), and its end
READ_SQL: Final = (
    "SELECT t0, MAX(COALESCE(e2e_s, 0), 0), COALESCE(client, -1), COALESCE(model, -1), "
    "COALESCE(route, -1), COALESCE(upstream, -1), CASE source "
    + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(SOURCE_CODES))
    + " ELSE -1 END, CASE state WHEN 'failed' THEN 1 WHEN 'cancelled' THEN 2 ELSE 0 END "
    "+ 4 * (COALESCE(output_est, 0) != 0) + 8 * (COALESCE(reasoning_est, 0) != 0), "
    "CAST(COALESCE(prompt_tokens, 0) AS INTEGER), CAST(COALESCE(cached_tokens, 0) AS INTEGER), "
    "CAST(COALESCE(output_tokens, 0) AS INTEGER), "
    "CAST(COALESCE(reasoning_tokens, 0) AS INTEGER), "
    "COALESCE(ttft_s, -1.0), COALESCE(ttfo_s, -1.0), COALESCE(decode_tps, -1.0), CASE verdict "
    + " ".join(f"WHEN '{v}' THEN {i}" for i, v in enumerate(VERDICT_KINDS, start=1))
    + " ELSE 0 END "
    "FROM requests WHERE t0 >= ? AND t0 < ? ORDER BY t0, id"
)
PACKS_SQL: Final = (
    "SELECT hour, CAST(data AS BLOB) FROM packs WHERE hour BETWEEN ? AND ? AND format = ?"
)
_INTS: Final = ("client", "model", "route", "upstream", "source", "flags")
_TOKENS: Final = ("prompt", "cached", "output", "reasoning")


@dataclass
class Window:
    """A window's requests as columns (tui/ledger/packs.py's FIELDS), and where they
    came from: ``packed_hours`` hours (``packed_requests`` requests) from
    packs, ``row_requests`` from the rows."""

    since: float
    until: float
    cols: packs.Columns
    packed_hours: int = 0
    packed_requests: int = 0
    row_requests: int = 0


def _quantized(seconds: Any, unit: float) -> Any:
    """A time or a rate in whole ``unit``s (half up), -1 where none (negative); past
    2**62 units (no real time or rate) it stays at 2**62."""
    import numpy as np

    whole = np.minimum(np.floor(seconds * unit + 0.5), 2.0**62)
    return np.where(seconds >= 0, whole, -1).astype(np.int64)


def _read_rows(con: sqlite3.Connection, lo: float, hi: float) -> tuple[dict[str, Any], Any]:
    """The rows of ``[lo, hi)`` as columns (shares zero), and each request's end."""
    import numpy as np

    rows = con.execute(READ_SQL, (lo, hi)).fetchall()
    c = list(zip(*rows)) if rows else [()] * 16
    cols: dict[str, Any] = {"t0": np.array(c[0], np.float64)}
    t1 = cols["t0"] + np.array(c[1], np.float64)
    for i, name in enumerate((*_INTS, *_TOKENS), start=2):
        cols[name] = np.array(c[i], np.int64)
    cols["ttft_us"] = _quantized(np.array(c[12], np.float64), 1e6)
    cols["ttfo_us"] = _quantized(np.array(c[13], np.float64), 1e6)
    cols["decode_mtps"] = _quantized(np.array(c[14], np.float64), 1e3)
    cols["verdict"] = np.array(c[15], np.int64)
    for name in ("busy", "joules", "covered"):
        cols[name] = np.zeros(len(rows))
    return cols, t1


def _spans(con: sqlite3.Connection, upstream: int, lo: float, hi: float) -> list[Any]:
    return con.execute(
        "SELECT t0, t1, joules FROM energy WHERE upstream = ? AND t0 < ? AND t1 > ? "
        "ORDER BY t0, id",
        (upstream, hi, lo),
    ).fetchall()


def build(con: sqlite3.Connection, lo: float, hi: float) -> tuple[dict[str, Any], Any]:
    """The requests sent in ``[lo, hi)`` as columns with their busy shares, joules and
    covered seconds (see the module docstring), and each one's end."""
    import numpy as np

    first = con.execute(
        "SELECT MIN(hour) FROM hours WHERE hour <= ? AND reach > ?", (hour_of(lo), lo)
    ).fetchone()[0]
    last = con.execute(
        "SELECT MAX(reach) FROM hours WHERE hour BETWEEN ? AND ?", (hour_of(lo), hour_of(hi))
    ).fetchone()[0]
    ctx_lo = lo if first is None else min(lo, float(first) * HOUR_S)
    ctx_hi = hi if last is None else max(hi, float(last))
    cols, t1 = _read_rows(con, ctx_lo, ctx_hi)
    engines = cols["upstream"]
    for engine in np.unique(engines):
        mine = np.flatnonzero(engines == engine)
        spans = [] if engine < 0 else _spans(con, int(engine), ctx_lo, ctx_hi)
        got = request_shares(cols["t0"][mine], t1[mine], spans)
        cols["busy"][mine] = got.busy
        cols["joules"][mine] = got.joules
        cols["covered"][mine] = got.covered
    inside = (cols["t0"] >= lo) & (cols["t0"] < hi)
    return packs.take(cols, inside), t1[inside]


def pack_due(
    con: sqlite3.Connection,
    now: float | None = None,
    lag_s: float = LAG_S,
    budget_s: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Pack every hour that is due (see the module docstring), a run of consecutive
    hours per transaction — sized to hold the write lock about :data:`PACK_RUN_S`
    (another process's writer waits that long at most), :data:`PACK_RUN_HOURS` at most;
    stop after ``budget_s`` seconds (None: when done). ``progress(done, due)`` hears
    after each run. The hours packed."""
    cut = (time.time() if now is None else now) - lag_s
    deadline = None if budget_s is None else time.monotonic() + budget_s
    done, size = 0, 1
    while deadline is None or time.monotonic() < deadline:
        t = time.monotonic()
        con.execute("BEGIN IMMEDIATE")
        try:
            due = [int(h) for (h,) in con.execute(_DUE, (FORMAT, cut, cut))]
            run = due[:1]
            for h in due[1:size]:
                if h != run[-1] + 1:
                    break
                run.append(h)
            if run:
                _pack_run(con, run)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        if not run:
            break
        took = time.monotonic() - t
        size = max(1, min(PACK_RUN_HOURS, int(len(run) * PACK_RUN_S / max(took, 1e-3))))
        done += len(run)
        if progress is not None:
            progress(done, done + len(due) - len(run))
    return done


_DUE: Final = (
    "SELECT h.hour FROM hours h LEFT JOIN packs p ON p.hour = h.hour AND p.format = ? "
    "WHERE p.hour IS NULL AND (h.hour + 1) * 3600 <= ? AND h.reach <= ? ORDER BY h.hour"
)


def _pack_run(con: sqlite3.Connection, run: list[int]) -> None:
    """Pack the consecutive hours of ``run`` (within the caller's transaction)."""
    import numpy as np

    cols, t1 = build(con, run[0] * HOUR_S, (run[-1] + 1) * HOUR_S)
    hours = np.floor_divide(cols["t0"], HOUR_S).astype(np.int64)
    for h in run:
        mine = np.flatnonzero(hours == h)
        if not len(mine):  # its requests were removed
            con.execute("DELETE FROM hours WHERE hour = ?", (h,))
            continue
        con.execute(
            "INSERT OR REPLACE INTO packs (hour, format, reach, requests, data) "
            "VALUES (?, ?, ?, ?, ?)",
            (h, FORMAT, float(t1[mine].max()), len(mine), packs.encode(packs.take(cols, mine))),
        )


def drop_damaged(con: sqlite3.Connection) -> int:
    """Delete the packs that cannot be read (a damaged file; they are read from the rows
    meanwhile), so that :func:`pack_due` makes them again; how many. Reads each pack's
    head and length only (the writer runs it with retention)."""
    bad = [
        int(hour)
        for hour, head, length in con.execute(
            "SELECT hour, substr(CAST(data AS BLOB), 1, ?), length(CAST(data AS BLOB)) "
            "FROM packs WHERE format = ?",
            (packs.HEAD_BYTES, FORMAT),
        )
        if not packs.whole(bytes(head), int(length))
    ]
    if bad:
        con.execute("BEGIN IMMEDIATE")
        try:
            con.executemany("DELETE FROM packs WHERE hour = ?", [(h,) for h in bad])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return len(bad)


def read_window(
    con: sqlite3.Connection,
    since: float,
    until: float,
    upstream: int | None = None,
    use_packs: bool = True,
) -> Window:
    """The requests sent in ``[since, until)`` (of one upstream's id, if given) as
    columns, from packs and rows (see the module docstring; in no particular order); the
    counts of where they came from are before the upstream is chosen. ``use_packs``
    False: every hour from the rows (what packs spare: benchmarks/ledger_usage.py)."""
    h0, h1 = hour_of(since), hour_of(until)
    window = Window(since, until, packs.Columns())
    parts: list[Any] = []
    inner: list[tuple[str, memoryview]] = []
    own = not con.in_transaction  # one snapshot: ours, or the caller's
    if own:
        con.execute("BEGIN")
    try:
        packed: set[int] = set()
        for hour, data in con.execute(PACKS_SQL, (h0, h1, FORMAT) if use_packs else (1, 0, 0)):
            parsed = packs.parse(data)
            if parsed is None:
                continue  # read from the rows
            packed.add(int(hour))
            if hour in (h0, h1):  # the window's first or last hour: the requests inside
                (mine,) = packs.records([parsed])
                parts.append(mine[(mine["t0"] >= since) & (mine["t0"] < until)])
            else:
                inner.append(parsed)
        parts += packs.records(inner)
        window.packed_hours = len(packed)
        window.packed_requests = sum(len(p) for p in parts)
        present = [int(h) for (h,) in con.execute(
            "SELECT hour FROM hours WHERE hour BETWEEN ? AND ? ORDER BY hour", (h0, h1)
        ) if int(h) not in packed]  # fmt: skip
        runs: list[list[int]] = []
        for h in present:
            if runs and h == runs[-1][-1] + 1:
                runs[-1].append(h)
            else:
                runs.append([h])
        for run in runs:
            lo, hi = max(since, run[0] * HOUR_S), min(until, (run[-1] + 1) * HOUR_S)
            cols, _t1 = build(con, lo, hi)
            window.row_requests += len(cols["t0"])
            parts.append(packs.narrowed(cols))
    finally:
        if own:
            con.execute("COMMIT")
    joined = packs.Columns(parts)
    window.cols = joined if upstream is None else joined.take(joined["upstream"] == upstream)
    return window
