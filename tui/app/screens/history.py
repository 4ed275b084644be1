"""HistoryScreen: past requests from the request ledger, newest first, filtered by client,
model, state and verdict; Enter opens one request's numbers (:class:`PastRequestScreen`), as the
requests view's timeline shows a live one's — without its chunks or text, which the
ledger never keeps.

Opened from the palette ("History: past requests"). The filter line takes
``client=NAME model=NAME state=done|failed|cancelled verdict=KIND`` (any of them, exact
names; KIND as tui/core/verdict.py names them: queued, prefill-bound, cache-hit, ...); the
ledger is read in a thread worker. Every name shown passes the terminal-safe filter.
"""

from __future__ import annotations

import shlex
import time
from typing import Any, Final

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from tui.core.outcome import OUTCOME_STATES
from tui.core.safe_text import terminal_label
from tui.core.verdict import VERDICT_KINDS

FILTER_KEYS: Final = ("client", "model", "state", "verdict")
COLUMNS: Final = (
    ("when", 14),
    ("client", 18),
    ("model", 16),
    ("state", 9),
    ("in", 6),
    ("out", 6),
    ("TTFT", 7),
    ("tok/s", 6),
    ("e2e", 7),
    ("why", 13),
)


class HistoryRead(Message):
    def __init__(self, rows: list[Any] | None, error: str | None) -> None:
        super().__init__()
        self.rows, self.error = rows, error


def parse_filter(text: str) -> tuple[dict[str, str], str | None]:
    """``client=… model=… state=… verdict=…`` → the filters, or (what was read, why not)."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        return {}, f"filter: {e}"
    out: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in FILTER_KEYS:
            return out, f"filter: {word!r} is not client=, model=, state= or verdict="
        if key == "state" and value not in OUTCOME_STATES:
            return out, f"filter: state is one of {', '.join(OUTCOME_STATES)}"
        if key == "verdict" and value not in VERDICT_KINDS:
            return out, f"filter: verdict is one of {', '.join(VERDICT_KINDS)}"
        out[key] = value
    return out, None


def _ms(s: float | None) -> str:
    return "–" if s is None else f"{s * 1000:.0f}ms" if s < 10 else f"{s:.1f}s"


def _n(n: int | None, estimated: bool = False) -> str:
    return "–" if n is None else f"~{n}" if estimated else str(n)


def row_cells(r: Any) -> list[str]:
    when = time.strftime("%m-%d %H:%M:%S", time.localtime(r.t0))
    return [
        when,
        terminal_label(r.client or "", 18),
        terminal_label(r.model or "–", 16),
        r.state,
        _n(r.prompt_tokens),
        _n(r.output_tokens, r.output_estimated),
        _ms(r.ttft_s),
        "–" if r.decode_tps is None else f"{r.decode_tps:.1f}",
        _ms(r.e2e_s),
        r.verdict or "–",
    ]


def numbers_text(r: Any) -> str:
    """One past request's numbers, a line each (names terminal-safe)."""

    def name(v: str | None) -> str:
        return terminal_label(v, 200) if v else "–"

    who = [
        f"{label} {name(v)}"
        for label, v in (
            ("name", r.c_name),
            ("user", r.c_user),
            ("key", r.c_key),
            ("program", r.c_program),
            ("process", r.c_process),
            ("address", r.c_address),
        )
        if v
    ]
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.t0))
    lines = [
        f"{name(r.rid)} · {r.source} · {r.state}"
        + (f" ({name(r.error_kind)})" if r.error_kind else "")
        + (f" · verdict {r.verdict}" if r.verdict else ""),
        f"sent {when} · {name(r.route)} ({name(r.api)}) → {name(r.upstream)}"
        f" · model {name(r.model)}",
        f"client {name(r.client)}" + (f" — {', '.join(who)}" if who else ""),
        "",
        f"TTFT {_ms(r.ttft_s)}   TTFO {_ms(r.ttfo_s)}   e2e {_ms(r.e2e_s)}"
        + ("   (not streamed: no first token of its own)" if r.streamed is False else ""),
        f"decode {'–' if r.decode_tps is None else f'{r.decode_tps:.1f}'} tok/s   "
        f"ITL p50 {_ms(r.itl_p50_s)}   p90 {_ms(r.itl_p90_s)}",
        f"tokens: prompt {_n(r.prompt_tokens)} (engine)   cached {_n(r.cached_tokens)} (engine)   "
        f"output {_n(r.output_tokens, r.output_estimated)}"
        + (" (estimate: chunks)" if r.output_estimated else " (engine)")
        + f"   reasoning {_n(r.reasoning_tokens, r.reasoning_estimated)}",
    ]
    if r.truth_source:
        lines.append(
            f"engine says ({name(r.truth_source)}): prefill "
            f"{'–' if r.truth_prompt_ms is None else f'{r.truth_prompt_ms:.1f} ms'} over "
            f"{_n(r.truth_prompt_eval)} tokens, output {_n(r.truth_output)}, decode "
            f"{'–' if r.truth_decode_tps is None else f'{r.truth_decode_tps:.1f} tok/s'}"
        )
    lines += ["", "The ledger keeps numbers and names only: no prompt, answer or chunk times."]
    return "\n".join(lines)


class PastRequestScreen(Screen[None]):
    """One past request's numbers (Esc: back)."""

    CSS = """
    PastRequestScreen #past-body { padding: 1 2; }
    """
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="past_back")]

    def __init__(self, row: Any) -> None:
        super().__init__(id="past-request")
        self.row = row

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(numbers_text(self.row), id="past-body", markup=False)
        yield Footer(compact=True)


class HistoryScreen(Screen[None]):
    CSS = """
    HistoryScreen { layout: vertical; }
    HistoryScreen #history-filter { height: 3; }
    HistoryScreen #history-status { height: 1; padding: 0 1; background: $panel; }
    HistoryScreen DataTable { height: 1fr; }
    """
    BINDINGS = [
        Binding("enter", "open", "Numbers", id="history_open"),
        Binding("slash", "filter", "Filter", id="history_filter"),
        Binding("escape", "app.pop_screen", "Back", id="history_back"),
    ]

    def __init__(self, filters: str = "") -> None:
        super().__init__(id="history")
        self.filters = filters
        self.rows: list[Any] = []

    def compose(self) -> ComposeResult:
        yield Input(
            self.filters,
            placeholder="filter: client=NAME model=NAME state=failed verdict=queued (Enter)",
            id="history-filter",
        )
        yield Static("reading the ledger…", id="history-status", markup=False)
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield Footer(compact=True)

    @property
    def table(self) -> DataTable[str]:
        return self.query_one("#history-table", DataTable)

    def on_mount(self) -> None:
        for label, width in COLUMNS:
            self.table.add_column(label, key=label, width=width)
        self.table.focus()
        self.load(self.filters)

    def load(self, text: str) -> None:
        filters, why = parse_filter(text)
        status = self.query_one("#history-status", Static)
        if why is not None:
            status.update(terminal_label(why, 300))
            return
        ledger = getattr(self.app, "ledger", None)

        def work() -> None:
            from tui.ledger.history import history

            try:
                if ledger is None:
                    raise RuntimeError("this app keeps no ledger")
                rows = ledger.read(
                    lambda con: history(
                        con,
                        filters.get("client"),
                        filters.get("model"),
                        filters.get("state"),
                        verdict=filters.get("verdict"),
                    )
                )
            except Exception as e:  # noqa: BLE001 - said on the screen
                self.post_message(HistoryRead(None, str(e)))
                return
            self.post_message(HistoryRead(rows, None))

        status.update("reading the ledger…")
        self.run_worker(work, thread=True, exclusive=True, group="history", exit_on_error=False)

    @on(Input.Submitted, "#history-filter")
    def _filter(self, msg: Input.Submitted) -> None:
        self.filters = msg.value
        self.load(msg.value)
        self.table.focus()

    def on_history_read(self, msg: HistoryRead) -> None:
        status = self.query_one("#history-status", Static)
        if msg.rows is None:
            status.update(terminal_label(f"history: {msg.error}", 400))
            return
        self.rows = msg.rows
        table = self.table
        table.clear()
        for r in msg.rows:
            table.add_row(*row_cells(r), key=str(r.row_id))
        shown = terminal_label(self.filters, 100) if self.filters else "all"
        status.update(
            f"{len(msg.rows)} most recent requests ({shown}) · Enter: numbers · / to filter"
        )

    @on(DataTable.RowSelected, "#history-table")
    def _selected(self, _msg: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        """Enter on a row: its numbers."""
        row = self.table.cursor_row
        if 0 <= row < len(self.rows):
            self.app.push_screen(PastRequestScreen(self.rows[row]))

    def action_filter(self) -> None:
        self.query_one("#history-filter", Input).focus()
