"""The TUI's link to the request ledger: its sink (every chat answer, every bench request
of the bench screen) and the reads the usage, history and chat panels make.

The sink is opened when the app is made; a ledger that cannot be used is a startup note,
never a failure. Reads open their own connection (SQLite's WAL lets a reader run beside
the writer, another process's too) and run in a thread worker: a query never holds the
UI's loop.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tui.config import LedgerSettings
from tui.ledger.energy_feed import EnergyFeed, track_window
from tui.ledger.retention import Retention
from tui.ledger.store import LedgerError, connect
from tui.ledger.writer import LedgerSink


def thread_note(app: Any) -> Callable[[str], None]:
    """A note from the ledger's writer thread, shown as a warning (dropped while the app
    is not running)."""

    def note(text: str) -> None:
        try:
            app.call_from_thread(app.notify, text, severity="warning", timeout=8)
        except RuntimeError:  # not running (yet, or any more)
            pass

    return note


class AppLedger:
    """``path`` None: the ledger is off (``--no-ledger``, ``[ledger] enabled = false``,
    or a test that passes none)."""

    def __init__(self, path: Path | None, settings: LedgerSettings | None = None) -> None:
        self.path = path
        self.settings = settings or LedgerSettings()
        self.sink: LedgerSink | None = None
        self.error: str | None = None
        self.energy: EnergyFeed | None = None

    def open(self, note: Callable[[str], None]) -> LedgerSink | None:
        """The sink, or None (why: :attr:`error`, said once through ``note``, which the
        writer's thread also uses)."""
        if self.path is None:
            return None
        s = self.settings
        try:
            self.sink = LedgerSink(self.path, Retention(s.keep_days, s.max_mb), note, s.queue)
        except LedgerError as e:
            self.error = f"ledger off: {e}"
        return self.sink

    def start_energy(self, track: Any, core: Any) -> None:
        """The device's energy (the hardware sampler's ``track``) into the ledger, for
        the engine of slot A: its joules per client (tui/ledger/energy_feed.py)."""
        if self.sink is None or self.energy is not None:
            return
        from tui.app.ledger_commands import engine_upstream

        self.energy = EnergyFeed(
            self.sink, lambda: engine_upstream(core), track_window(track), track.latest_t
        )
        self.energy.start()

    def stop_energy(self) -> None:
        if self.energy is not None:
            self.energy.stop()

    def reader(self) -> sqlite3.Connection:
        """A connection to read (LedgerError: no ledger, or none yet). Call in a thread;
        what was written just before is flushed first."""
        if self.path is None:
            raise LedgerError("the ledger is off (--no-ledger or [ledger] enabled = false)")
        if self.sink is not None:
            self.sink.flush(1.0)
        return connect(self.path, create=False)

    def read(self, query: Callable[[sqlite3.Connection], Any]) -> Any:
        """``query(connection)`` on a connection of its own, closed after (in a thread)."""
        con = self.reader()
        try:
            return query(con)
        finally:
            con.close()
