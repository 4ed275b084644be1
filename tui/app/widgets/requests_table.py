"""RequestsTable: the fleet's line-at-a-time table, showing proxied requests.

The same drawing, cursor, scrolling and header clicks as :class:`FleetTable` (each row
formatted once per update into fixed-width text; a frame joins a few segments per line),
with the state cell coloured by the request's state: decoding (green), cancelled
(amber), failed (red). Rows are :class:`tui.proxy.rows.RequestRow`, columns
:mod:`tui.proxy.columns`; the table reads only what both kinds share (a row's ``key``,
a column's ``key``, ``header``, ``text`` and ``numeric``).
"""

from __future__ import annotations

from typing import Any

from tui.app.widgets.fleet_table import FleetTable

STATE_STYLE = {"decoding": "up", "prefill": "", "cancelled": "warn", "failed": "down"}


class RequestsTable(FleetTable):
    def _format(self, row: Any) -> list[tuple[str, str]]:
        """The row as text chunks, the state cell apart (its own colour)."""
        chunks: list[tuple[str, str]] = []
        text = ""
        for col, w in self.columns:
            cell = self._cell(col.text(row), w, col.numeric)
            if col.key == "state":
                chunks += [(text, ""), (cell, STATE_STYLE.get(row.state, ""))]
                text = ""
            else:
                text += cell
        chunks.append((text, ""))
        return [c for c in chunks if c[0]]

    def cell_text(self, index: int, column: str) -> str:
        for col, _ in self.columns:
            if col.key == column:
                return str(col.text(self.rows[index]))
        raise KeyError(column)
