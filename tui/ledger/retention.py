"""How long the ledger keeps requests: by age, and under a size cap, oldest first.

Defaults (docs/ledger.md; ``[ledger]`` keep_days / max_mb): :data:`KEEP_DAYS` days and
:data:`MAX_MB` MiB. A pass deletes the requests (and energy spans) older than the age
limit, then, while the file's pages in use pass the size cap, the oldest requests (as
many as the excess's share of the rows, at most :data:`CHUNK` at a time); freed
pages go back to the file system (``PRAGMA incremental_vacuum``); names no row refers to
any more leave ``texts`` at most once a day (:func:`collect_texts`: a full read). Deleting goes in
chunks, each its own short transaction, so another process writing to the same file
waits for one chunk at most. The hour packs go with their rows: the triggers of
tui/ledger/store.py drop, in the transaction that deletes a request, the pack of its hour
and every pack of requests in flight with it (packed again from the rows left, by the
next packing pass); ``hours`` before the oldest request left are deleted.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from typing import Final

from tui.ledger.columns import COLUMNS
from tui.ledger.packs import hour_of

KEEP_DAYS: Final = 90.0
MAX_MB: Final = 1024.0
CHUNK: Final = 20_000

_TEXT_COLUMNS: Final = tuple(name for name, text in COLUMNS if text)


@dataclass(frozen=True)
class Retention:
    keep_days: float = KEEP_DAYS
    max_mb: float = MAX_MB


def used_bytes(con: sqlite3.Connection) -> int:
    """Bytes of the file's pages in use (its size less its free pages; the WAL apart)."""
    size = int(con.execute("PRAGMA page_size").fetchone()[0])
    pages = int(con.execute("PRAGMA page_count").fetchone()[0])
    free = int(con.execute("PRAGMA freelist_count").fetchone()[0])
    return (pages - free) * size


def _chunk(con: sqlite3.Connection, sql: str, args: tuple[float | int, ...]) -> int:
    con.execute("BEGIN IMMEDIATE")
    try:
        n = con.execute(sql, args).rowcount
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return max(0, n)


def prune(con: sqlite3.Connection, retention: Retention, now: float) -> int:
    """One retention pass (see the module docstring); the requests deleted."""
    cutoff = now - retention.keep_days * 86_400
    deleted = 0
    while True:
        n = _chunk(
            con,
            "DELETE FROM requests WHERE id IN (SELECT id FROM requests WHERE t0 < ? LIMIT ?)",
            (cutoff, CHUNK),
        )
        deleted += n
        if n < CHUNK:
            break
    _chunk(con, "DELETE FROM energy WHERE t1 < ?", (cutoff,))
    cap = int(retention.max_mb * 1024 * 1024)
    while (used := used_bytes(con)) > cap:
        rows = int(con.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
        share = (used - cap) / used  # of the rows, about this share must go
        n = _chunk(
            con,
            "DELETE FROM requests WHERE id IN (SELECT id FROM requests ORDER BY t0 LIMIT ?)",
            (min(CHUNK, max(1, math.ceil(rows * share * 1.05))),),
        )
        deleted += n
        if n == 0:
            break
        oldest = con.execute("SELECT MIN(t0) FROM requests").fetchone()[0]
        if oldest is not None:
            _chunk(con, "DELETE FROM energy WHERE t1 < ?", (float(oldest),))
    if deleted:
        oldest = con.execute("SELECT MIN(t0) FROM requests").fetchone()[0]
        first = hour_of(float(oldest)) if oldest is not None else 2**62
        _chunk(con, "DELETE FROM hours WHERE hour < ?", (first,))  # no request left in them
        con.execute("PRAGMA incremental_vacuum")
    return deleted


def collect_texts(con: sqlite3.Connection) -> int:
    """Names no request or energy span refers to any more leave ``texts`` (a full read
    of the table: the writer runs it at most once a day, after rows were deleted)."""
    used = " UNION ".join(f"SELECT {c} FROM requests WHERE {c} IS NOT NULL" for c in _TEXT_COLUMNS)
    n = _chunk(
        con,
        f"DELETE FROM texts WHERE id NOT IN ({used}) "
        "AND id NOT IN (SELECT upstream FROM energy) "
        "AND id NOT IN (SELECT source FROM energy WHERE source IS NOT NULL)",
        (),
    )
    con.execute("PRAGMA incremental_vacuum")
    return n
