"""Tables of live rows (the fleet's endpoints, the proxy's requests): columns that fit a
terminal's width, sorting with missing values last, and the cells' number formats.

Each table (tui/fleet/columns.py, tui/proxy/columns.py) lists its own columns; what they
have in common is here, so both tables narrow, sort and write numbers alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tui.core.safe_text import terminal_label

Row = TypeVar("Row")

DASH = "–"  # a value the table does not have
CELL_PADDING = 2  # the screens' tables pad each cell by one column on each side
STRETCH_CAP = 40  # a stretchy column grows to at most this many cells unless capped


@dataclass(frozen=True)
class Column(Generic[Row]):
    """One column. ``priority``: lower stays longer as the width shrinks; ``stretch``:
    takes a share of spare width; ``value``: what it sorts by (None sorts last)."""

    key: str
    header: str
    width: int
    priority: int
    text: Callable[[Row], str]
    value: Callable[[Row], Any]
    numeric: bool = True
    stretch: bool = False


def fit_columns(
    columns: Iterable[Column[Row]],
    width: int,
    padding: int = CELL_PADDING,
    caps: Mapping[str, int] | None = None,
) -> list[tuple[Column[Row], int]]:
    """The columns that fit in ``width`` cells (chosen by priority, the first always,
    shown in table order), each with its width; spare width goes round the stretchy
    columns one cell at a time, each up to its cap (``caps`` by key, else STRETCH_CAP)."""
    columns = list(columns)
    caps = caps or {}
    chosen: set[str] = set()
    used = 0
    for col in sorted(columns, key=lambda c: c.priority):
        need = col.width + padding
        if used + need <= width or not chosen:
            chosen.add(col.key)
            used += need
    shown = [c for c in columns if c.key in chosen]
    widths = {c.key: c.width for c in shown}
    stretchy = [c for c in shown if c.stretch]
    spare = max(0, width - used)
    while spare > 0 and stretchy:
        grew = False
        for c in stretchy:
            if spare > 0 and widths[c.key] < caps.get(c.key, STRETCH_CAP):
                widths[c.key] += 1
                spare -= 1
                grew = True
        if not grew:
            break
    return [(c, widths[c.key]) for c in shown]


def sort_rows(rows: list[Row], col: Column[Row], reverse: bool = False) -> list[Row]:
    """``rows`` ordered by ``col``'s value; rows without one come last either way, and
    ties keep the order ``rows`` came in."""
    have = [r for r in rows if col.value(r) is not None]
    missing = [r for r in rows if col.value(r) is None]
    return sorted(have, key=col.value, reverse=reverse) + missing


def clip(text: str, width: int) -> str:
    """A cell: one terminal-safe line of at most ``width`` characters (what a row names
    — a model, a route, an error — comes from other clients and servers)."""
    return terminal_label(text, width)


def ms_text(v: float | None) -> str:
    """Milliseconds in at most 6 cells: 9.5ms, 950ms, 9.50s, 95s."""
    if v is None:
        return DASH
    if v < 10:
        return f"{v:.1f}ms"
    if v < 1000:
        return f"{v:.0f}ms"
    return f"{v / 1000:.2f}s" if v < 10_000 else f"{v / 1000:.0f}s"


def tps_text(v: float | None) -> str:
    """Tokens per second in at most 5 cells: 9.5, 950, 9500, 95.0k."""
    if v is None:
        return DASH
    if v < 100:
        return f"{v:.1f}"
    return f"{v:.0f}" if v < 10_000 else f"{v / 1000:.1f}k"


def model_text(model: str | None) -> str:
    """A model as a table shows it: a file path (llama-server's model id) by its file
    name; the full id is on the detail line."""
    if not model:
        return DASH
    if model.startswith("/") or model.startswith("./") or "\\" in model:
        return model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return model
