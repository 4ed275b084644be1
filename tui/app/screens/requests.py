"""RequestsScreen: every client's requests through an ``infertop proxy``, live, like top.

One row per request in flight and the recent ones (client, route, model, prompt and
output tokens, TTFT, current tok/s, ITL p50, age, state), sortable; above them the chat
screen's sparklines fed by all the traffic (one value per finished request: TTFT, ITL
p50, decode tok/s; and all output tokens per second); under them the highlighted row in
full. Enter opens that request's timeline (tui/app/screens/request_timeline.py), where
its text is shown only when asked for; ``u`` the usage screen (who used the servers,
from the request ledger: tui/app/screens/usage.py). Whose hardware: the app's sampler
(``--telemetry``), one line.

The feed (:class:`tui.proxy.watch.ProxyWatch`, its own thread) is copied on a timer at
:data:`REFRESH_S`; the table is redrawn only when a copy changed or rows age.
"""

from __future__ import annotations

from typing import Any, Protocol

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Static

from tui.app.messages import TelemetrySampled
from tui.app.screens.sorted_table import SortedTableScreen
from tui.app.widgets.hardware_panel import source_tag
from tui.app.widgets.metric_lines import MetricLines
from tui.app.widgets.metrics_panel import values_text
from tui.app.widgets.requests_table import RequestsTable
from tui.core.inside_text import full_lines, short_line
from tui.core.safe_text import terminal_label
from tui.proxy.columns import BY_KEY, Column, detail_text, fit_columns, sort_rows
from tui.proxy.rows import RequestRow
from tui.proxy.watch import ProxyWatch, WatchSnapshot

REFRESH_S = 0.5
SPARK_ROWS = [
    ("ttft", "TTFT ms", "ms"),
    ("itl", "ITL ms", "ms"),
    ("decode", "dec t/s", "tok/s"),
    ("rate", "all t/s", "tok/s"),
]


class RequestsFeed(Protocol):
    """What the screen reads: :class:`ProxyWatch`, or a test's fixed one."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def snapshot(self) -> WatchSnapshot: ...
    def detail(self, rid: str, with_text: bool = False) -> dict[str, Any]: ...


def status_text(snap: WatchSnapshot, url: str) -> str:
    """The line above the sparklines: the counts first (they matter at 80 columns),
    then the link's trouble, then the upstream and the proxy."""
    info, totals = snap.info, snap.totals
    flying = sum(1 for r in snap.rows if r.in_flight)
    parts = [f"{flying} in flight"]
    if totals:
        failed, cancelled = totals.get("failed", 0), totals.get("cancelled", 0)
        counts = f"{totals.get('ended', 0) - failed - cancelled} done"
        counts += f", {failed} failed" if failed else ""
        counts += f", {cancelled} cancelled" if cancelled else ""
        parts.append(counts)
        if totals.get("other"):
            parts.append(f"{totals['other']} other requests")
    if not snap.attached:
        parts.append(snap.status)
    if snap.bad_lines:
        parts.append(f"{snap.bad_lines} bad lines skipped")
    up = info.get("upstream")
    where = f"{info.get('kind') or '?'} {up}" if up else ""
    parts.append(f"{where} via proxy {info.get('listen') or url}".strip())
    return terminal_label(" · ".join(parts), 1000)


def hardware_line(s: Any, width: int) -> str:
    """Whose hardware and how busy, one line: CPU, RAM, then each GPU's utilisation,
    memory and power, as many GPUs as fit ``width``."""
    head = "hardware " + (source_tag(s).rstrip(": ") or "(this machine)") + ":"
    parts = [head]
    if s.system is not None:
        parts.append(f"CPU {s.system.cpu_percent:.0f}% RAM {s.system.ram_used / 2**30:.1f}G")
    for g in s.gpu.gpus:
        util = "–" if g.util_percent is None else f"{g.util_percent:.0f}%"
        mem = "" if g.mem_used is None else f" {g.mem_used / 2**30:.0f}"
        if mem and g.mem_total:
            mem += f"/{g.mem_total / 2**30:.0f}G"
        power = "" if g.power_w is None else f" {g.power_w:.0f}W"
        part = f"GPU{g.index} {util}{mem}{power}"
        if len(" ".join([*parts, part])) > width:
            break
        parts.append(part)
    if not s.gpu.gpus:
        parts.append("no GPU")
    return terminal_label(" ".join(parts), width)


def sessions_text(sessions: list[dict[str, Any]], width: int) -> list[str]:
    """One line per agent session, newest first: turns, context now, prompt tokens
    cached vs computed over its turns, and its time in prefill, decode, in the client
    between turns, and queued."""
    if not sessions:
        return ["sessions: none yet (requests that continue one conversation are grouped)"]
    out = [f"sessions ({len(sessions)}):"]
    for d in sessions:
        text = (
            f"{d.get('id')} {d.get('client') or '?'} · {_n(d, 'turns')} turns · ctx "
            f"{_n(d, 'context_tokens')} · cached/computed {_n(d, 'cached_tokens')}/"
            f"{_n(d, 'computed_tokens')} · prefill {_s(d, 'prefill_ms')} decode "
            f"{_s(d, 'decode_ms')} client {_s(d, 'client_ms')} queue {_s(d, 'queue_ms')}"
        )
        out.append(terminal_label(text, width))
    return out


def _n(d: dict[str, Any], key: str) -> str:
    v = d.get(key)
    return "–" if v is None else f"{v:,.0f}"


def _s(d: dict[str, Any], key: str) -> str:
    v = d.get(key)
    return "–" if v is None else f"{v / 1000:.1f} s"


class RequestsScreen(SortedTableScreen):
    by_key = BY_KEY
    CSS_PATH = "requests.tcss"

    BINDINGS = [
        Binding("enter", "open", "Timeline", id="requests_open", priority=True),
        Binding("s", "sort(1)", "Sort", id="requests_sort"),
        Binding("S", "sort(-1)", "Sort back", id="requests_sort_back", show=False),
        Binding("r", "reverse", "Reverse", id="requests_reverse"),
        Binding("f", "follow", "Follow", id="requests_follow"),
        Binding("u", "usage", "Usage", id="requests_usage"),
        # (not in the footer, which is full at 80 columns: the lines they open name them)
        Binding("e", "engine", "Engine", id="requests_engine", show=False),
        Binding("a", "sessions", "Sessions", id="requests_sessions", show=False),
    ]

    def __init__(self, feed: str | RequestsFeed) -> None:
        super().__init__("age_ms", id="requests")  # newest first
        self.url = feed if isinstance(feed, str) else ""
        self.feed: RequestsFeed = ProxyWatch(feed) if isinstance(feed, str) else feed
        self.snapshot: WatchSnapshot | None = None
        self.rows: list[RequestRow] = []
        self.shown: list[RequestRow] = []  # in the table's order
        self.sample: Any = None
        self._drawn_version = -1
        self._reasoning = False  # a row thought before it answered: the TTFO column shows
        self._engine_full = False
        self._show_sessions = False

    def compose(self) -> ComposeResult:
        yield Static("attaching to the proxy…", id="req-status", markup=False)
        rows = [(key, label) for key, label, _ in SPARK_ROWS]
        yield MetricLines(rows, label_width=8, values_width=34, min_spark=8)
        yield Static("", id="req-hw", markup=False)  # shown once a hardware sample comes
        yield Static("", id="req-engine", markup=False)  # the engine's inside (e: all)
        yield RequestsTable(id="req-table")
        yield Static("", id="req-detail", markup=False)
        yield Static("", id="req-why", markup=False)  # the highlighted request's verdict
        yield Static("", id="req-sessions", markup=False)  # agent sessions (a)
        yield Footer(compact=True)

    @property
    def table(self) -> RequestsTable:
        return self.query_one(RequestsTable)

    def on_mount(self) -> None:
        self._set_columns(self.size.width)
        self.table.focus()
        self.feed.start()
        self.refresh_rows()
        self.set_interval(REFRESH_S, self.refresh_rows)

    def on_unmount(self) -> None:
        self.feed.stop()

    # -- drawing ------------------------------------------------------------------------
    def fit(self, width: int) -> list[tuple[Column, int]]:
        return fit_columns(width, reasoning=self._reasoning)

    def first_reverse(self, key: str) -> bool:
        return BY_KEY[key].numeric and key != "age_ms"  # age: newest first

    def refresh_rows(self) -> None:
        """Copy the feed and redraw what changed (the timer's tick)."""
        snap = self.feed.snapshot()
        self.snapshot = snap
        self.rows = snap.rows
        reasoning = any(r.reasoning_tokens for r in snap.rows)
        if reasoning != self._reasoning:
            self._reasoning = reasoning
            self._set_columns(self.size.width)
        self.query_one("#req-status", Static).update(status_text(snap, self.url))
        self._show_inside(snap)
        if snap.version != self._drawn_version or any(r.in_flight for r in snap.rows):
            self._drawn_version = snap.version
            self._fill()
            self._sparks(snap)

    def _sparks(self, snap: WatchSnapshot) -> None:
        lines = self.query_one(MetricLines)
        for key, _, unit in SPARK_ROWS:
            values = snap.series.get(key, [])
            current = values[-1] if values else None
            lines.show(key, values, values_text(unit, values, current))

    def _fill(self) -> None:
        rows = sort_rows(self.rows, self.sort_key, self.sort_reverse)
        self.shown = rows
        headers = self.headers()
        # FleetTable's signature names the fleet's rows and columns; RequestsTable draws
        # the proxy's, which have the same shape (a row's key; a column's key, header,
        # text and numeric)
        self.table.show(self.columns, rows, headers)  # type: ignore[arg-type]
        self._show_detail()

    def highlighted_row(self) -> RequestRow | None:
        cursor = self.table.cursor
        return self.shown[cursor] if cursor < len(self.shown) else None

    def _show_detail(self) -> None:
        row = self.highlighted_row()
        self.query_one("#req-detail", Static).update(detail_text(row) if row else "")
        verdict = self.snapshot.verdicts.get(row.id) if row and self.snapshot else None
        why = self.query_one("#req-why", Static)
        why.display = verdict is not None
        if verdict is not None:
            why.update(terminal_label("why: " + verdict.text, max(20, self.size.width - 2)))

    def _show_inside(self, snap: WatchSnapshot) -> None:
        """The engine's inside (its short line; ``e``: every line) and, with ``a``, the
        agent sessions — all from the proxy's own reads and records."""
        width = max(20, self.size.width - 2)
        line = self.query_one("#req-engine", Static)
        inside = snap.inside
        line.display = inside is not None
        if inside is not None:
            lines = full_lines(inside) if self._engine_full else [short_line(inside)]
            hint = " (e: less, a: sessions)" if self._engine_full else " (e: all, a: sessions)"
            lines[0] = "engine: " + lines[0] + hint
            line.update("\n".join(terminal_label(x, width) for x in lines))
        box = self.query_one("#req-sessions", Static)
        box.display = self._show_sessions
        if self._show_sessions:
            box.update("\n".join(sessions_text(snap.sessions, width)))

    def action_engine(self) -> None:
        """e: the engine's inside in full, or in one line."""
        self._engine_full = not self._engine_full
        if self.snapshot is not None:
            self._show_inside(self.snapshot)

    def action_sessions(self) -> None:
        """a: the agent sessions the proxy grouped (tui/proxy/sessions.py), or not."""
        self._show_sessions = not self._show_sessions
        if self.snapshot is not None:
            self._show_inside(self.snapshot)

    @on(RequestsTable.Highlighted)
    def _highlighted(self, _msg: RequestsTable.Highlighted) -> None:
        self._show_detail()

    @on(TelemetrySampled)
    def _telemetry(self, msg: TelemetrySampled) -> None:
        self.sample = msg.sample
        text = hardware_line(msg.sample, max(20, self.size.width - 2))
        line = self.query_one("#req-hw", Static)
        line.update(text)
        line.display = True

    # -- keys ---------------------------------------------------------------------------
    def action_follow(self) -> None:
        """f: newest first again, the cursor on the top row."""
        self.sort_key, self.sort_reverse = "age_ms", False
        self._fill()
        self.table.move_to(0)

    def action_usage(self) -> None:
        """u: who used the servers, from the request ledger (tui/app/screens/usage.py)."""
        from tui.app.screens.usage import UsageScreen

        self.app.push_screen(UsageScreen("day"))

    def action_open(self) -> None:
        """Enter: the highlighted request's timeline."""
        row = self.highlighted_row()
        if row is None:
            return
        from tui.app.screens.request_timeline import RequestTimelineScreen

        self.app.push_screen(RequestTimelineScreen(self.feed, row))
