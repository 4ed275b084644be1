"""FleetTable: a fixed-column table of fleet rows, drawn a line at a time.

Textual's DataTable renders every visible cell through Rich on each change (about
0.2 ms a cell: 170 ms a frame for 50 lines × 19 columns measured with 200 rows refreshed
each second), so the fleet has its own table: each row is formatted once per refresh into
plain text at fixed column widths, and a frame only joins a few segments per visible
line. The header stays on the first line; the rows scroll under it. Up/Down/PgUp/PgDn/
Home/End move the cursor; a click on the header asks for a sort by that column.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.core.table import clip
from tui.fleet.columns import Column
from tui.fleet.rows import EndpointRow

PAD = 1  # blank cells on each side of a column


class FleetTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    FleetTable {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-gutter: stable;
    }
    FleetTable > .fleet-table--header { text-style: bold; background: $panel; color: $foreground; }
    FleetTable > .fleet-table--even-row { background: $surface-lighten-1 50%; }
    FleetTable > .fleet-table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
    }
    FleetTable:focus > .fleet-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    FleetTable > .fleet-table--up { color: $success; }
    FleetTable > .fleet-table--warn { color: $warning; }
    FleetTable > .fleet-table--down { color: $error; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "fleet-table--header",
        "fleet-table--even-row",
        "fleet-table--cursor",
        "fleet-table--up",
        "fleet-table--warn",
        "fleet-table--down",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "move(-1000000)", "First", show=False),
        Binding("end", "move(1000000)", "Last", show=False),
    ]

    class Highlighted(Message):
        """The cursor is on another row (``key``: EndpointRow.key)."""

        def __init__(self, key: str | None) -> None:
            super().__init__()
            self.key = key

    class HeaderClicked(Message):
        """A click on a column's header."""

        def __init__(self, column: str) -> None:
            super().__init__()
            self.column = column

    def __init__(self, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(**kw)
        self.columns: list[tuple[Column, int]] = []
        self.rows: list[EndpointRow] = []
        self.cursor = 0
        self._header = ""
        self._lines: list[list[tuple[str, str]]] = []  # per row: (text, state) chunks

    # -- data ---------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def cursor_key(self) -> str | None:
        return self.rows[self.cursor].key if self.rows else None

    def show(
        self, columns: list[tuple[Column, int]], rows: list[EndpointRow], headers: list[str]
    ) -> None:
        """New columns (widths, header labels) and rows in display order; the cursor
        stays on the row it was on."""
        key = self.cursor_key
        self.columns, self.rows = columns, rows
        self._header = "".join(
            self._cell(label, w, col.numeric) for (col, w), label in zip(columns, headers)
        )
        self._lines = [self._format(row) for row in rows]
        keys = [r.key for r in rows]
        self.cursor = keys.index(key) if key in keys else min(self.cursor, max(0, len(rows) - 1))
        width = sum(w + 2 * PAD for _, w in columns)
        self.virtual_size = Size(width, len(rows) + 1)
        self.refresh()
        if key != self.cursor_key:
            self.post_message(self.Highlighted(self.cursor_key))

    @staticmethod
    def _cell(text: str, width: int, numeric: bool) -> str:
        text = clip(text, width)
        return " " * PAD + (text.rjust(width) if numeric else text.ljust(width)) + " " * PAD

    def _format(self, row: EndpointRow) -> list[tuple[str, str]]:
        """The row as text chunks: the state cell apart (it has its own colour)."""
        chunks: list[tuple[str, str]] = []
        text = ""
        for col, w in self.columns:
            cell = self._cell(col.text(row), w, col.numeric)
            if col.key == "state":
                state = "down" if not row.up else ("warn" if row.error else "up")
                chunks += [(text, ""), (cell, state)]
                text = ""
            elif col.key == "error" and not row.up:
                chunks += [(text, ""), (cell, "down")]
                text = ""
            else:
                text += cell
        chunks.append((text, ""))
        return [c for c in chunks if c[0]]

    def cell_text(self, index: int, column: str) -> str:
        """What row ``index`` shows in ``column`` (stripped)."""
        for col, _ in self.columns:
            if col.key == column:
                return col.text(self.rows[index])
        raise KeyError(column)

    # -- drawing ------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("fleet-table--header")
            strip = Strip([Segment(self._header, style)], len(self._header))
            return strip.crop_extend(scroll_x, scroll_x + width, style)
        index = scroll_y + y - 1
        if index >= len(self._lines):
            return Strip.blank(width, base)
        if index == self.cursor and self.rows:
            style = base + self.get_component_rich_style("fleet-table--cursor")
            colour: dict[str, Style] = {}
        else:
            style = base
            if index % 2 == 0:
                style = base + self.get_component_rich_style("fleet-table--even-row")
            colour = {
                s: self.get_component_rich_style(f"fleet-table--{s}", partial=True)
                for s in ("up", "warn", "down")
            }
        segments = [
            Segment(text, style + colour[state] if state in colour else style)
            for text, state in self._lines[index]
        ]
        length = sum(len(t) for t, _ in self._lines[index])
        return Strip(segments, length).crop_extend(scroll_x, scroll_x + width, style)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.refresh()

    # -- moving -------------------------------------------------------------------------
    def move_to(self, index: int) -> None:
        if not self.rows:
            return
        index = max(0, min(len(self.rows) - 1, index))
        if index == self.cursor:
            return
        self.cursor = index
        self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.Highlighted(self.cursor_key))

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.size.height - 1)  # the header takes a line
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)

    def action_move(self, step: int) -> None:
        self.move_to(self.cursor + step)

    def action_page(self, step: int) -> None:
        self.move_to(self.cursor + step * max(1, self.size.height - 2))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        scroll_x, scroll_y = self.scroll_offset
        if offset.y == 0:
            x = offset.x + scroll_x
            for col, w in self.columns:
                if x < w + 2 * PAD:
                    self.post_message(self.HeaderClicked(col.key))
                    return
                x -= w + 2 * PAD
            return
        self.move_to(scroll_y + offset.y - 1)
