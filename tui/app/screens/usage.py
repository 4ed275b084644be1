"""UsageScreen: who used the servers, from the request ledger — per client, and per model
or per verdict (``v`` switches: why the requests took their time, tui/core/verdict.py)
over the last hour, day or week, with tokens over time as sparklines.

Opened with ``u`` from the requests view, or the palette ("Usage: …"; the chat's "this
engine, last 24 h" opens it on one server). The ledger is read in a thread worker (its
own connection: the proxy or this app may be writing meanwhile); the result comes back
as a :class:`UsageRead` message. Every name shown (clients choose theirs) passes the
terminal-safe filter. Busy time is an attribution (tui/core/attribution.py).
"""

from __future__ import annotations

import time
from typing import Any, Final

from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.app.widgets.metric_lines import MetricLines
from tui.core.safe_text import terminal_label

WINDOWS: Final = {"hour": 3600.0, "day": 86_400.0, "week": 7 * 86_400.0}
SPARK_KEYS: Final = ("all", "top1", "top2", "top3")
COLUMNS: Final = ("reqs", "fail", "prompt", "output", "TTFT p50", "tok/s", "busy s")
# the second table's grouping: its first column's title and read_usage's key
SECOND: Final = {"model": "models", "verdict": "verdicts"}


class UsageRead(Message):
    """The ledger's answer for a window (from the worker thread), or why none."""

    def __init__(self, window: str, result: dict[str, Any] | None, error: str | None) -> None:
        super().__init__()
        self.window, self.result, self.error = window, result, error


def read_usage(ledger: Any, since: float, until: float, upstream: str | None) -> dict[str, Any]:
    """In a thread: the window's usage per client, per model and per verdict, and
    tokens over time."""
    from tui.ledger.history import over_time_of
    from tui.ledger.usage import summarize, texts_of, window_of

    def query(con: Any) -> dict[str, Any]:
        window = window_of(con, since, until, upstream)  # read once: packs and rows
        names = texts_of(con)
        return {
            "clients": summarize(window, names, ("client",)),
            "models": summarize(window, names, ("model",)),
            "verdicts": summarize(window, names, ("verdict",)),
            "series": over_time_of(window, names, 60, 3),
        }

    result: dict[str, Any] = ledger.read(query)
    return result


def _ms(s: float | None) -> str:
    return "–" if s is None else f"{s * 1000:.0f}"


def group_cells(g: Any) -> list[str]:
    d = g.to_dict(())
    est = "~" if d["output_estimated"] else ""
    return [
        f"{d['requests']:,}",
        f"{d['failed']:,}",
        f"{d['prompt_tokens']:,}",
        f"{est}{d['output_tokens']:,}",
        _ms(d["ttft_p50_s"]),
        "–" if d["decode_tps_p50"] is None else f"{d['decode_tps_p50']:.1f}",
        f"{d['busy_s']:.1f}",
    ]


class UsageScreen(Screen[None]):
    CSS = """
    UsageScreen { layout: vertical; }
    UsageScreen #usage-status { height: 1; padding: 0 1; background: $panel; }
    UsageScreen MetricLines { padding: 0 1; }
    UsageScreen DataTable { height: 1fr; }
    UsageScreen #usage-note { height: 1; padding: 0 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding("h", "window('hour')", "Hour", id="usage_hour"),
        Binding("d", "window('day')", "Day", id="usage_day"),
        Binding("w", "window('week')", "Week", id="usage_week"),
        Binding("v", "second", "Model/verdict", id="usage_second"),
        Binding("r", "reload", "Reload", id="usage_reload"),
        Binding("escape", "app.pop_screen", "Back", id="usage_back"),
    ]

    def __init__(self, window: str = "day", upstream: str | None = None) -> None:
        super().__init__(id="usage")
        self.window = window if window in WINDOWS else "day"
        self.upstream = upstream
        self.second = "model"  # the second table: per model or per verdict (SECOND)
        self.result: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Static("reading the ledger…", id="usage-status", markup=False)
        yield MetricLines([(k, k) for k in SPARK_KEYS], label_width=14, values_width=14)
        yield DataTable(id="usage-clients", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="usage-models", cursor_type="row", zebra_stripes=True)
        yield Static(
            "busy s: an attribution (each busy instant split among the requests in flight)",
            id="usage-note",
            markup=False,
        )
        yield Footer(compact=True)

    def on_mount(self) -> None:
        for table_id, first in (("#usage-clients", "client"), ("#usage-models", self.second)):
            self._columns(self.query_one(table_id, DataTable), first)
        self.action_reload()

    @staticmethod
    def _columns(table: DataTable[str], first: str) -> None:
        table.add_column(first, key="name", width=22)
        for c in COLUMNS:
            table.add_column(c, key=c)

    def action_second(self) -> None:
        """v: the second table per model, or per verdict (no new read: both are read)."""
        self.second = "verdict" if self.second == "model" else "model"
        table = self.query_one("#usage-models", DataTable)
        table.clear(columns=True)
        self._columns(table, self.second)
        if self.result is not None:
            self._fill(table, self.result[SECOND[self.second]])

    def action_window(self, window: str) -> None:
        self.window = window
        self.action_reload()

    def action_reload(self) -> None:
        ledger = getattr(self.app, "ledger", None)
        until = time.time()
        since = until - WINDOWS[self.window]
        window, upstream = self.window, self.upstream

        def work() -> None:
            try:
                if ledger is None:
                    raise RuntimeError("this app keeps no ledger")
                result = read_usage(ledger, since, until, upstream)
            except Exception as e:  # noqa: BLE001 - said on the screen
                self.post_message(UsageRead(window, None, str(e)))
                return
            self.post_message(UsageRead(window, result, None))

        self.query_one("#usage-status", Static).update(f"reading the last {window}…")
        self.run_worker(work, thread=True, exclusive=True, group="usage", exit_on_error=False)

    def on_usage_read(self, msg: UsageRead) -> None:
        status = self.query_one("#usage-status", Static)
        if msg.error is not None or msg.result is None:
            status.update(terminal_label(f"usage: {msg.error}", 400))
            return
        self.result = msg.result
        clients = msg.result["clients"]
        where = f" · {self.upstream}" if self.upstream else ""
        total = clients.total
        status.update(
            terminal_label(
                f"last {msg.window}{where}: {total.requests:,} requests, "
                f"{total.prompt_tokens + total.output_tokens:,} tokens, "
                f"engines busy {clients.busy_wall_s:.0f} s (h/d/w: window)",
                400,
            )
        )
        self._fill(self.query_one("#usage-clients", DataTable), clients)
        self._fill(self.query_one("#usage-models", DataTable), msg.result[SECOND[self.second]])
        lines = self.query_one(MetricLines)
        series: dict[str, list[float]] = msg.result["series"]
        names = [k for k in series if k != "all"]
        for i, key in enumerate(SPARK_KEYS):
            who: str | None = "all" if key == "all" else None
            if key != "all" and i - 1 < len(names):
                who = names[i - 1]
            data = series.get(who, []) if who is not None else []
            lines.relabel(key, terminal_label(who or "", 14))
            lines.show(key, data, f"{sum(data):,.0f} tok" if data else "–")

    @staticmethod
    def _fill(table: DataTable[str], u: Any) -> None:
        table.clear()
        for g in u.groups:
            table.add_row(terminal_label(g.key[0], 22), *group_cells(g))
