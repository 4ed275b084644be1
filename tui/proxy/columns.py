"""The requests table's columns: header, width, text, sort value, and which stay when the
terminal is narrow. What each number means: :mod:`tui.proxy.rows`.

Everything a row shows came from other clients and servers (model names, routes, errors):
each cell passes the terminal-safe filter (:func:`clip`).
"""

from __future__ import annotations

from tui.core import table
from tui.core.table import CELL_PADDING, DASH, clip, model_text, ms_text, tps_text
from tui.proxy.rows import RequestRow, RequestState

Column = table.Column[RequestRow]
STATE_ORDER = {
    RequestState.PREFILL: 0,
    RequestState.DECODING: 1,
    RequestState.FAILED: 2,
    RequestState.CANCELLED: 3,
    RequestState.DONE: 4,
}


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


def who_text(r: RequestRow) -> str:
    """Who sent it (its label: tui/proxy/identity.py), else its address."""
    return r.who or r.client


def state_text(r: RequestRow) -> str:
    if r.state == RequestState.FAILED and r.status and r.status >= 400:
        return f"failed {r.status}"
    return str(r.state)


def ttft_text(r: RequestRow) -> str:
    return "n/s" if r.stream is False else ms_text(r.ttft_ms)


def ttfo_text(r: RequestRow) -> str:
    return "n/s" if r.stream is False else ms_text(r.ttfo_ms)


COLUMNS: tuple[Column, ...] = (
    Column("state", "state", 10, 0, state_text, lambda r: STATE_ORDER.get(r.state, 9), False),
    Column("client", "client", 15, 9, lambda r: who_text(r), lambda r: who_text(r), False, True),
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
    Column("ttfo_ms", "TTFO", 6, 10, ttfo_text, lambda r: r.ttfo_ms),
    Column("tps", "tok/s", 5, 4, lambda r: tps_text(r.tps), lambda r: r.tps),
    Column("itl_p50_ms", "ITL50", 6, 5, lambda r: ms_text(r.itl_p50_ms), lambda r: r.itl_p50_ms),
    Column("age_ms", "age", 5, 6, lambda r: age_text(r.age_ms), lambda r: r.age_ms),
)
BY_KEY = {c.key: c for c in COLUMNS}
CAPS = {"client": 22, "route": 21, "model": 32}


def fit_columns(
    width: int, padding: int = CELL_PADDING, reasoning: bool = False
) -> list[tuple[Column, int]]:
    """The columns that fit in ``width`` cells (by priority, in table order), each with
    its width; spare width goes to the stretchy ones (client, route, model). TTFO only
    when ``reasoning`` (some row thought before answering): without reasoning it is TTFT."""
    columns = COLUMNS if reasoning else tuple(c for c in COLUMNS if c.key != "ttfo_ms")
    return table.fit_columns(columns, width, padding, CAPS)


def sort_rows(rows: list[RequestRow], key: str, reverse: bool = False) -> list[RequestRow]:
    """Rows ordered by column ``key`` (rows without a value last; ties: newest first)."""
    return table.sort_rows(sorted(rows, key=lambda r: r.age_ms), BY_KEY[key], reverse)


def detail_text(r: RequestRow) -> str:
    """Everything about one row on one line (under the table)."""
    who = f"from {r.who} ({r.client})" if r.who else f"from {r.client}"
    parts = [f"{r.method} {r.route}", who, model_text(r.model)]
    parts.append("streamed" if r.stream else "not streamed" if r.stream is False else "?")
    status = f"HTTP {r.status}" if r.status else "no answer yet"
    parts.append(f"{r.state} ({status})")
    if r.prompt_tokens is not None:
        parts.append(f"{r.prompt_tokens} prompt tokens")
    parts.append(
        f"{tokens_text(r.output_tokens, r.output_estimated)} out"
        + (" (estimate: chunks)" if r.output_estimated else "")
    )
    if r.reasoning_tokens:
        parts.append(f"{r.reasoning_tokens} of them reasoning")
    if r.ttfo_ms is not None and r.ttfo_ms != r.ttft_ms:
        parts.append(f"TTFO {ms_text(r.ttfo_ms)}")
    if r.e2e_ms is not None:
        parts.append(f"e2e {ms_text(r.e2e_ms)}")
    if r.error:
        parts.append(r.error)
    if r.trace_id:
        parts.append(f"trace {r.trace_id}")
    parts.append("Enter: timeline")
    return clip(" · ".join(parts), 4000)
