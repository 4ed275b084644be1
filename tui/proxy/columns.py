"""The requests table's columns: header, width, text, sort value, and which stay when the
terminal is narrow. What each number means: :mod:`tui.proxy.rows`.

Everything a row shows came from other clients and servers (model names, routes, errors):
each cell passes the terminal-safe filter (:func:`clip`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tui.core.safe_text import terminal_label
from tui.proxy.rows import RequestRow

DASH = "–"
CELL_PADDING = 2
STATE_ORDER = {"prefill": 0, "decoding": 1, "failed": 2, "cancelled": 3, "done": 4}


def ms_text(v: float | None) -> str:
    if v is None:
        return DASH
    if v < 10:
        return f"{v:.1f}ms"
    if v < 1000:
        return f"{v:.0f}ms"
    return f"{v / 1000:.2f}s" if v < 10_000 else f"{v / 1000:.0f}s"


def tps_text(v: float | None) -> str:
    if v is None:
        return DASH
    if v < 100:
        return f"{v:.1f}"
    return f"{v:.0f}" if v < 10_000 else f"{v / 1000:.1f}k"


def age_text(ms: float) -> str:
    s = ms / 1000
    if s < 60:
        return f"{s:.0f}s" if s >= 10 else f"{s:.1f}s"
    if s < 3600:
        return f"{s // 60:.0f}m{s % 60:02.0f}"
    return f"{s // 3600:.0f}h{s % 3600 // 60:02.0f}"


def tokens_text(n: int | None, estimated: bool = False) -> str:
    if n is None:
        return DASH
    return f"~{n}" if estimated else str(n)


def state_text(r: RequestRow) -> str:
    if r.state == "failed" and r.status and r.status >= 400:
        return f"failed {r.status}"
    return r.state


def model_text(model: str | None) -> str:
    if not model:
        return DASH
    if model.startswith("/") or "\\" in model:
        return model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return model


def ttft_text(r: RequestRow) -> str:
    return "n/s" if r.stream is False else ms_text(r.ttft_ms)


@dataclass(frozen=True)
class Column:
    """One column (as :class:`tui.fleet.columns.Column`: ``priority`` lower stays longer,
    ``stretch`` takes spare width, ``value`` sorts, None last)."""

    key: str
    header: str
    width: int
    priority: int
    text: Callable[[RequestRow], str]
    value: Callable[[RequestRow], Any]
    numeric: bool = True
    stretch: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("state", "state", 10, 0, state_text, lambda r: STATE_ORDER.get(r.state, 9), False),
    Column("client", "client", 15, 9, lambda r: r.client, lambda r: r.client, False, True),
    Column("route", "route", 13, 8, lambda r: r.route, lambda r: r.route, False, True),
    Column("model", "model", 12, 1, lambda r: model_text(r.model), lambda r: r.model, False, True),
    Column(
        "prompt_tokens",
        "in",
        5,
        7,
        lambda r: tokens_text(r.prompt_tokens),
        lambda r: r.prompt_tokens,
    ),
    Column(
        "output_tokens",
        "out",
        5,
        2,
        lambda r: tokens_text(r.output_tokens, r.output_estimated),
        lambda r: r.output_tokens,
    ),
    Column("ttft_ms", "TTFT", 6, 3, ttft_text, lambda r: r.ttft_ms),
    Column("tps", "tok/s", 5, 4, lambda r: tps_text(r.tps), lambda r: r.tps),
    Column("itl_p50_ms", "ITL50", 6, 5, lambda r: ms_text(r.itl_p50_ms), lambda r: r.itl_p50_ms),
    Column("age_ms", "age", 5, 6, lambda r: age_text(r.age_ms), lambda r: r.age_ms),
)
BY_KEY = {c.key: c for c in COLUMNS}
CAPS = {"client": 22, "route": 21, "model": 32}


def fit_columns(width: int, padding: int = CELL_PADDING) -> list[tuple[Column, int]]:
    """The columns that fit in ``width`` cells (by priority, in table order), each with
    its width; spare width goes to the stretchy ones (client, route, model)."""
    chosen: set[str] = set()
    used = 0
    for col in sorted(COLUMNS, key=lambda c: c.priority):
        need = col.width + padding
        if used + need <= width or not chosen:
            chosen.add(col.key)
            used += need
    shown = [c for c in COLUMNS if c.key in chosen]
    widths = {c.key: c.width for c in shown}
    stretchy = [c for c in shown if c.stretch]
    spare = max(0, width - used)
    while spare > 0 and stretchy:
        grew = False
        for c in stretchy:
            if spare > 0 and widths[c.key] < CAPS.get(c.key, 40):
                widths[c.key] += 1
                spare -= 1
                grew = True
        if not grew:
            break
    return [(c, widths[c.key]) for c in shown]


def sort_rows(rows: list[RequestRow], key: str, reverse: bool = False) -> list[RequestRow]:
    """Rows ordered by column ``key`` (rows without a value last; ties: newest first)."""
    col = BY_KEY[key]
    newest = sorted(rows, key=lambda r: r.age_ms)
    have = [r for r in newest if col.value(r) is not None]
    missing = [r for r in newest if col.value(r) is None]
    return sorted(have, key=col.value, reverse=reverse) + missing


def clip(text: str, width: int) -> str:
    return terminal_label(text, width)


def detail_text(r: RequestRow) -> str:
    """Everything about one row on one line (under the table)."""
    parts = [f"{r.method} {r.route}", f"from {r.client}", model_text(r.model)]
    parts.append("streamed" if r.stream else "not streamed" if r.stream is False else "?")
    status = f"HTTP {r.status}" if r.status else "no answer yet"
    parts.append(f"{r.state} ({status})")
    if r.prompt_tokens is not None:
        parts.append(f"{r.prompt_tokens} prompt tokens")
    parts.append(
        f"{tokens_text(r.output_tokens, r.output_estimated)} out"
        + (" (estimate: chunks)" if r.output_estimated else "")
    )
    if r.e2e_ms is not None:
        parts.append(f"e2e {ms_text(r.e2e_ms)}")
    if r.error:
        parts.append(r.error)
    parts.append("Enter: timeline")
    return terminal_label(" · ".join(parts), 4000)
