"""SortedTableScreen: what the fleet and requests screens share about their table.

Columns chosen to fit the width (again on every resize, the table redrawn only when
the choice changed), the sort column's header marked ▲ / ▼, and the keys: ``s`` / ``S``
sort by the next / previous column shown (numbers largest first), ``r`` reverses, a
click on a header sorts by it (again: reverses). A screen says which columns it has
(:meth:`fit`, :attr:`by_key`) and how to draw its rows (:meth:`_fill`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual import events, on
from textual.screen import Screen

from tui.app.widgets.fleet_table import FleetTable
from tui.core.table import Column

SCROLLBAR = 2  # the table keeps room for its vertical scrollbar


class SortedTableScreen(Screen[None]):
    by_key: Mapping[str, Column[Any]] = {}

    def __init__(self, sort_key: str, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.sort_key = sort_key
        self.sort_reverse = False
        self.columns: list[tuple[Column[Any], int]] = []

    # -- what a screen says -------------------------------------------------------------
    def fit(self, width: int) -> list[tuple[Column[Any], int]]:
        """The columns shown at ``width`` cells, each with its width."""
        raise NotImplementedError

    def _fill(self) -> None:
        """Draw the rows in sort order."""
        raise NotImplementedError

    def first_reverse(self, key: str) -> bool:
        """Whether ``s`` starts a column reversed (numbers: largest first)."""
        return self.by_key[key].numeric

    # -- shared ---------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self._set_columns(event.size.width)

    def _set_columns(self, width: int) -> None:
        cols = self.fit(max(20, width - SCROLLBAR))
        if [(c.key, w) for c, w in cols] != [(c.key, w) for c, w in self.columns]:
            self.columns = cols
            self._fill()

    def _header(self, col: Column[Any]) -> str:
        arrow = ("▼" if self.sort_reverse else "▲") if col.key == self.sort_key else ""
        return col.header + arrow

    def headers(self) -> list[str]:
        return [self._header(c) for c, _ in self.columns]

    def _sort_by(self, key: str, reverse: bool) -> None:
        self.sort_key, self.sort_reverse = key, reverse
        self._fill()

    def action_sort(self, step: int) -> None:
        """s / S: sort by the next / previous column shown (numbers: largest first)."""
        keys = [c.key for c, _ in self.columns]
        i = keys.index(self.sort_key) if self.sort_key in keys else 0
        key = keys[(i + step) % len(keys)]
        self._sort_by(key, reverse=self.first_reverse(key))

    def action_reverse(self) -> None:
        self._sort_by(self.sort_key, not self.sort_reverse)

    @on(FleetTable.HeaderClicked)
    def _header_clicked(self, msg: FleetTable.HeaderClicked) -> None:
        if msg.column == self.sort_key:
            self.action_reverse()
        else:
            self._sort_by(msg.column, reverse=self.by_key[msg.column].numeric)
