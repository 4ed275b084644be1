"""LedgerSink: the outcome sink that keeps every finished request in the ledger.

:meth:`LedgerSink.publish` runs on the request's path (the proxy's loop, the chat's, a
bench's): it appends the outcome to a bounded queue and returns — a few hundred
nanoseconds, no I/O, no lock. One writer thread of its own turns queued outcomes into rows
(:mod:`tui.ledger.columns`) and writes what has gathered in one transaction
(``BEGIN IMMEDIATE``, at most :data:`BATCH` rows), at once: a request is on disk within
milliseconds of its end, so a process killed loses at most the requests still in flight
(WAL with ``synchronous = NORMAL``: a committed transaction survives the process, not
necessarily a power cut).

Bounded: past ``queue_limit`` outcomes waiting (a disk that stalls), new ones are dropped
and counted; a write that fails (a full disk, a file made read-only, another process
holding the lock past the busy timeout) loses its batch, counted. Either is said once
through ``note`` (and said again, once, when writing works again); the requests
themselves are served as ever. Retention (:mod:`tui.ledger.retention`) runs on the same
thread, at start and every :data:`PRUNE_EVERY_S`; so does packing the hours that are due
(:func:`tui.ledger.shares.pack_due`, every :data:`PACK_EVERY_S`, at most
:data:`PACK_BUDGET_S` at a time between batches of rows — sooner again while hours are
left, as after an upgrade).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tui.core.outcome import RequestOutcome
from tui.ledger.columns import INSERT, TEXT_AT, row_of
from tui.ledger.retention import Retention, collect_texts, prune
from tui.ledger.shares import drop_damaged, pack_due
from tui.ledger.store import connect

BATCH: Final = 512
QUEUE_LIMIT: Final = 4096
PRUNE_EVERY_S: Final = 600.0
COLLECT_EVERY_S: Final = 86_400.0
CLOSE_WAIT_S: Final = 5.0
PACK_EVERY_S: Final = 60.0
PACK_BUDGET_S: Final = 1.0


@dataclass(frozen=True)
class EnergySpan:
    """The device serving ``upstream`` used ``joules`` over wall-clock ``[t0, t1)``
    (tui/core/energy.py's window, from ``source``): what busy time's joules are
    attributed from (tui/core/attribution.py)."""

    upstream: str
    t0: float
    t1: float
    joules: float
    source: str


class Texts:
    """Names as ids in ``texts``, resolved within one transaction (another process may
    have pruned a name between two: nothing is cached across transactions)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.ids: dict[str, int] = {}

    def id(self, text: str | None) -> int | None:
        if text is None:
            return None
        found = self.ids.get(text)
        if found is None:
            con = self.con
            con.execute("INSERT OR IGNORE INTO texts (text) VALUES (?)", (text,))
            found = int(con.execute("SELECT id FROM texts WHERE text = ?", (text,)).fetchone()[0])
            self.ids[text] = found
        return found


def write_batch(con: sqlite3.Connection, items: list[RequestOutcome | EnergySpan]) -> None:
    """One transaction: every outcome's row and every energy span."""
    con.execute("BEGIN IMMEDIATE")
    try:
        texts = Texts(con)
        rows = []
        for item in items:
            if isinstance(item, EnergySpan):
                con.execute(
                    "INSERT INTO energy (upstream, t0, t1, joules, source) VALUES (?, ?, ?, ?, ?)",
                    (texts.id(item.upstream), item.t0, item.t1, item.joules, texts.id(item.source)),
                )
                continue
            row = row_of(item)
            for i in TEXT_AT:
                row[i] = texts.id(row[i])
            rows.append(row)
        if rows:
            con.executemany(INSERT, rows)
        con.execute("COMMIT")
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        raise


class LedgerSink:
    """An :class:`~tui.core.outcome.OutcomeSink` writing to the ledger at ``path`` (see
    the module docstring). Opening checks and upgrades the file at once (LedgerError);
    ``note`` hears, from the writer's thread, what the user should know."""

    def __init__(
        self,
        path: Path,
        retention: Retention | None = None,
        note: Callable[[str], None] | None = None,
        queue_limit: int = QUEUE_LIMIT,
    ) -> None:
        self.path = path
        self.retention = retention or Retention()
        self._note = note
        self.queue_limit = queue_limit
        self.con = connect(path)
        self._queue: deque[RequestOutcome | EnergySpan] = deque()
        self._wake = threading.Event()
        self._stop = False
        self.written = 0
        self.dropped = 0  # the queue was full
        self.lost = 0  # a write failed
        self.pruned = 0
        self.packed = 0  # hours packed
        self._said_pack = False
        self._uncollected = 0  # requests deleted since names were last collected
        self._next_collect = 0.0
        self._busy = False  # a batch taken from the queue is being written
        self._failing: str | None = None  # why writing fails now (said once)
        self._said_full = False
        self._thread = threading.Thread(target=self._run, name="infertop-ledger", daemon=True)
        self._thread.start()

    # -- on the request's path ---------------------------------------------------------
    def publish(self, outcome: RequestOutcome) -> None:
        self._put(outcome)

    def room(self) -> int:
        """How many more outcomes the queue takes before it drops (Outcomes.publish_many
        waits on it)."""
        return self.queue_limit - len(self._queue)

    def energy(self, span: EnergySpan) -> None:
        """A span of the device's energy (any thread)."""
        self._put(span)

    def _put(self, item: RequestOutcome | EnergySpan) -> None:
        if self._stop:
            return
        if len(self._queue) >= self.queue_limit:
            self.dropped += 1
            if not self._said_full:
                self._said_full = True
                self.note(
                    f"ledger {self.path}: {self.queue_limit} requests wait to be written; "
                    "more are not recorded (counted) until it catches up"
                )
            return
        self._queue.append(item)
        self._wake.set()

    # -- the writer's thread -----------------------------------------------------------
    def note(self, text: str) -> None:
        if self._note is not None:
            try:
                self._note(text)
            except Exception:  # noqa: BLE001 - a note must not stop the writer
                pass

    def _run(self) -> None:
        next_prune = next_pack = 0.0
        while True:
            self._wake.wait(timeout=max(0.0, min(1.0, next_pack - time.monotonic())))
            self._wake.clear()
            while self._queue:
                self._busy = True
                try:
                    items = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
                    self._write(items)
                finally:
                    self._busy = False
            if self._stop:
                return
            now = time.monotonic()
            if now >= next_prune:
                next_prune = now + PRUNE_EVERY_S
                self._prune()
            if now >= next_pack:
                more = self._pack()
                next_pack = time.monotonic() + (0.05 if more else PACK_EVERY_S)

    def _write(self, items: list[RequestOutcome | EnergySpan]) -> None:
        try:
            write_batch(self.con, items)
        except Exception as e:  # noqa: BLE001 - SQLite's, the disk's, or a row's: counted
            n = sum(1 for i in items if not isinstance(i, EnergySpan))
            self.lost += n
            why = str(e) or type(e).__name__
            if self._failing is None:
                self._failing = why
                self.note(
                    f"ledger {self.path}: cannot record ({why}); requests go on being "
                    "served, not recorded (counted) until it can"
                )
            return
        self.written += sum(1 for i in items if not isinstance(i, EnergySpan))
        if self._failing is not None:
            self._failing = None
            self.note(f"ledger {self.path}: recording again ({self.lost} requests not recorded)")
        if self._said_full and not self._queue:
            self._said_full = False

    def _prune(self) -> None:
        try:
            drop_damaged(self.con)
            n = prune(self.con, self.retention, time.time())
            self.pruned += n
            self._uncollected += n
            now = time.monotonic()
            if self._uncollected and now >= self._next_collect:
                self._next_collect = now + COLLECT_EVERY_S
                self._uncollected = 0
                collect_texts(self.con)
        except sqlite3.Error as e:
            self.note(f"ledger {self.path}: retention could not run ({e})")

    def _pack(self) -> bool:
        """Pack the hours that are due, for at most :data:`PACK_BUDGET_S`; True: some
        were (more may be left)."""
        try:
            packed = pack_due(self.con, budget_s=PACK_BUDGET_S)
        except sqlite3.Error as e:
            if not self._said_pack:
                self._said_pack = True
                self.note(f"ledger {self.path}: hours could not be packed ({e}); read from rows")
            return False
        self.packed += packed
        return packed > 0

    # -- the end -----------------------------------------------------------------------
    def flush(self, timeout: float = CLOSE_WAIT_S) -> bool:
        """Wait until what is queued now is written (tests; a front end before it reads
        the ledger itself); False: not within ``timeout``."""
        deadline = time.monotonic() + timeout
        self._wake.set()
        while self._queue or self._busy:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def close(self) -> None:
        """Write what is queued (within :data:`CLOSE_WAIT_S`), then stop."""
        self._stop = True
        self._wake.set()
        self._thread.join(CLOSE_WAIT_S)
        if not self._thread.is_alive():
            try:
                self.con.close()
            except sqlite3.Error:
                pass

    def stats(self) -> dict[str, int]:
        return {
            "written": self.written,
            "dropped": self.dropped,
            "lost": self.lost,
            "pruned": self.pruned,
        }
