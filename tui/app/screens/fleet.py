"""FleetScreen: one row per inference endpoint, refreshed on a timer, sortable.

The fleet is read in a thread worker (``Fleet.refresh`` blocks on HTTP), which posts
each snapshot as a :class:`FleetUpdated` message; the table is only touched in its
handler. While another screen is on top the worker sleeps. Enter on a row opens the
chat on that endpoint (``InfertopApp.open_endpoint``), so our client-side TTFT shows
beside the server's own. Columns are chosen to fit the width (tui/fleet/columns.py);
the line under the table tells everything about the highlighted row.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Protocol

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from tui.app.screens.sorted_table import SortedTableScreen
from tui.app.widgets.fleet_table import FleetTable
from tui.fleet.columns import BY_KEY, Column, detail_text, fit_columns, sort_rows
from tui.fleet.rows import EndpointRow, FleetSnapshot


class FleetSource(Protocol):
    """What the screen reads: :class:`tui.fleet.poller.Fleet`, or a test's fixed one."""

    def refresh(self) -> FleetSnapshot: ...


class FleetUpdated(Message):
    """A refresh finished (from the fleet worker thread)."""

    def __init__(self, snapshot: FleetSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class FleetScreen(SortedTableScreen):
    by_key = BY_KEY
    CSS_PATH = "fleet.tcss"

    BINDINGS = [
        Binding("enter", "open", "Chat on it", id="fleet_open", priority=True),
        Binding("s", "sort(1)", "Sort", id="fleet_sort"),
        Binding("S", "sort(-1)", "Sort back", id="fleet_sort_back", show=False),
        Binding("r", "reverse", "Reverse", id="fleet_reverse"),
        Binding("escape", "back", "Back", id="fleet_back"),
    ]

    def __init__(self, fleet: FleetSource, interval_s: float = 2.0) -> None:
        super().__init__("name", id="fleet")
        self.fleet = fleet
        self.interval_s = interval_s
        self.rows: list[EndpointRow] = []
        self.snapshot: FleetSnapshot | None = None
        self._wake = threading.Event()
        self._paused = threading.Event()
        self.apply_ms: deque[float] = deque(maxlen=1000)  # time to put each snapshot in

    def compose(self) -> ComposeResult:
        yield Static("reading the endpoints…", id="fleet-status", markup=False)
        yield FleetTable(id="fleet-table")
        yield Static("", id="fleet-detail", markup=False)
        yield Footer(compact=True)

    @property
    def table(self) -> FleetTable:
        return self.query_one(FleetTable)

    def on_mount(self) -> None:
        self._set_columns(self.size.width)
        self.table.focus()
        self.run_worker(
            self._poll,
            thread=True,
            group="fleet",
            exclusive=True,
            exit_on_error=False,
            description="read the fleet",
        )

    def on_screen_suspend(self) -> None:
        self._paused.set()

    def on_screen_resume(self) -> None:
        if self._paused.is_set():
            self._paused.clear()
            self._wake.set()  # read again now: the numbers are stale

    def on_unmount(self) -> None:
        self._wake.set()

    def _poll(self) -> None:
        """Thread worker: refresh, post, sleep the interval (not while hidden)."""
        worker = get_current_worker()
        while not worker.is_cancelled:
            if not self._paused.is_set():
                snapshot = self.fleet.refresh()
                if worker.is_cancelled:
                    return
                self.post_message(FleetUpdated(snapshot))
            self._wake.wait(self.interval_s)
            self._wake.clear()

    # -- the table ----------------------------------------------------------------------
    def fit(self, width: int) -> list[tuple[Column, int]]:
        return fit_columns(width)

    @on(FleetUpdated)
    def _updated(self, msg: FleetUpdated) -> None:
        self.show_snapshot(msg.snapshot)

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Put a refresh's rows in the table (and the status line)."""
        t0 = time.perf_counter()
        self.snapshot = snapshot
        self.rows = snapshot.rows
        self._fill()
        self._show_status()
        self.apply_ms.append((time.perf_counter() - t0) * 1000)

    def _fill(self) -> None:
        """The rows in sort order, the highlighted row kept."""
        rows = sort_rows(self.rows, self.sort_key, self.sort_reverse)
        self.table.show(self.columns, rows, self.headers())
        self._show_detail()

    def highlighted_row(self) -> EndpointRow | None:
        table = self.table
        return table.rows[table.cursor] if table.rows else None

    def _show_status(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        down = sum(1 for r in snap.rows if not r.up)
        parts = [f"{len(snap.rows)} endpoints" + (f", {down} down" if down else ", all up")]
        if snap.prometheus:
            err = f" ERROR: {snap.prometheus_error}" if snap.prometheus_error else ""
            parts.append(f"Prometheus {snap.prometheus}, {snap.queries} requests{err}")
        if snap.scrapes:
            parts.append(f"{snap.scrapes} scraped")
        parts.append(f"{snap.took_s * 1000:.0f} ms/refresh every {self.interval_s:g} s")
        self.query_one("#fleet-status", Static).update(" · ".join(parts))

    def _show_detail(self) -> None:
        row = self.highlighted_row()
        text = detail_text(row) if row is not None else ""
        self.query_one("#fleet-detail", Static).update(text)

    @on(FleetTable.Highlighted)
    def _highlighted(self, _msg: FleetTable.Highlighted) -> None:
        self._show_detail()

    # -- keys -----------------------------------------------------------------------
    class EndpointChosen(Message):
        """Enter on a row: the chat should talk to this endpoint."""

        def __init__(self, row: EndpointRow) -> None:
            super().__init__()
            self.row = row

    class BackToChat(Message):
        """Esc: back to the chat (the app decides what that means)."""

    def action_open(self) -> None:
        """Enter: the chat, talking to the highlighted endpoint."""
        row = self.highlighted_row()
        if row is not None:
            self.post_message(self.EndpointChosen(row))

    def action_back(self) -> None:
        self.post_message(self.BackToChat())
