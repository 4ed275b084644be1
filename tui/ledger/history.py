"""Past requests from the ledger, newest first, filtered; and usage over time.

:func:`history` gives one :class:`PastRequest` per row (its numbers and names, as
:mod:`tui.ledger.columns` stores them), filtered by client, model and state, at most
``limit`` of them, read through the ``requests_t0`` index newest first; and by verdict
kind (tui/core/verdict.py: a kind infertop did not write is read as none). :func:`over_time`
gives the tokens (prompt + output) per time bucket of a window, in all and for the
busiest clients: what the usage screen's sparklines draw.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Final

from tui.core.outcome import OUTCOME_STATES
from tui.core.verdict import VERDICT_KINDS
from tui.ledger.shares import Window
from tui.ledger.usage import texts_of, window_of

HISTORY_LIMIT: Final = 500
_HISTORY: Final = (
    "SELECT id, rid, source, state, error_kind, route, api, upstream, model, client, c_name, "
    "c_user, c_key, c_program, c_process, c_address, t0, e2e_s, ttft_s, ttfo_s, streamed, "
    "decode_tps, itl_p50_s, itl_p90_s, prompt_tokens, cached_tokens, output_tokens, "
    "output_est, reasoning_tokens, reasoning_est, truth_source, truth_prompt_ms, "
    "truth_prompt_eval, truth_output, truth_decode_tps, verdict FROM requests"
)
_NAMED: Final = (
    "error_kind", "route", "api", "upstream", "model", "client", "c_name", "c_user", "c_key",
    "c_program", "c_process", "c_address", "truth_source",
)  # fmt: skip


@dataclass(frozen=True)
class PastRequest:
    """One ledger row; names as text (None where absent). Times in seconds, ``t0`` the
    wall clock. See tui/ledger/columns.py for each number's definition and source."""

    row_id: int
    rid: str
    source: str
    state: str
    error_kind: str | None
    route: str | None
    api: str | None
    upstream: str | None
    model: str | None
    client: str | None
    c_name: str | None
    c_user: str | None
    c_key: str | None
    c_program: str | None
    c_process: str | None
    c_address: str | None
    t0: float
    e2e_s: float | None
    ttft_s: float | None
    ttfo_s: float | None
    streamed: bool | None
    decode_tps: float | None
    itl_p50_s: float | None
    itl_p90_s: float | None
    prompt_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    output_estimated: bool
    reasoning_tokens: int | None
    reasoning_estimated: bool
    truth_source: str | None
    truth_prompt_ms: float | None
    truth_prompt_eval: int | None
    truth_output: int | None
    truth_decode_tps: float | None
    verdict: str | None = None  # its verdict's kind, where its place gave one


def _id_of(con: sqlite3.Connection, text: str) -> int | None:
    found = con.execute("SELECT id FROM texts WHERE text = ?", (text,)).fetchone()
    return None if found is None else int(found[0])


def history(
    con: sqlite3.Connection,
    client: str | None = None,
    model: str | None = None,
    state: str | None = None,
    upstream: str | None = None,
    limit: int = HISTORY_LIMIT,
    verdict: str | None = None,
) -> list[PastRequest]:
    """The newest ``limit`` requests matching every filter given (exact names; a name the
    ledger never saw, a state or verdict kind not infertop's, matches nothing)."""
    where: list[str] = []
    args: list[Any] = []
    for column, value in (("client", client), ("model", model), ("upstream", upstream)):
        if value:
            found = _id_of(con, value)
            if found is None:
                return []
            where.append(f"{column} = ?")
            args.append(found)
    if state:
        if state not in OUTCOME_STATES:
            return []
        where.append("state = ?")
        args.append(state)
    if verdict:
        if verdict not in VERDICT_KINDS:
            return []
        where.append("verdict = ?")
        args.append(verdict)
    sql = _HISTORY + (f" WHERE {' AND '.join(where)}" if where else "")
    sql += " ORDER BY t0 DESC LIMIT ?"
    rows = con.execute(sql, (*args, limit)).fetchall()
    names = texts_of(con) if rows else {}
    out = []
    for r in rows:
        d: dict[str, Any] = dict(zip(_FIELDS, r))
        for k in _NAMED:
            d[k] = names.get(d[k]) if d[k] is not None else None
        d["streamed"] = None if d["streamed"] is None else bool(d["streamed"])
        d["output_estimated"] = bool(d.pop("output_est"))
        d["reasoning_estimated"] = bool(d.pop("reasoning_est"))
        if d["verdict"] not in VERDICT_KINDS:  # none, or a text no infertop wrote
            d["verdict"] = None
        out.append(PastRequest(**d))
    return out


_FIELDS: Final = (
    "row_id", "rid", "source", "state", "error_kind", "route", "api", "upstream", "model",
    "client", "c_name", "c_user", "c_key", "c_program", "c_process", "c_address", "t0",
    "e2e_s", "ttft_s", "ttfo_s", "streamed", "decode_tps", "itl_p50_s", "itl_p90_s",
    "prompt_tokens", "cached_tokens", "output_tokens", "output_est", "reasoning_tokens",
    "reasoning_est", "truth_source", "truth_prompt_ms", "truth_prompt_eval", "truth_output",
    "truth_decode_tps", "verdict",
)  # fmt: skip


def over_time(
    con: sqlite3.Connection,
    since: float,
    until: float,
    buckets: int = 60,
    top: int = 3,
    upstream: str | None = None,
) -> dict[str, list[float]]:
    """Tokens (prompt + output) per bucket of ``[since, until)``: ``"all"`` and the
    ``top`` clients with the most tokens in the window, each a list of ``buckets`` —
    from the window's columns, as ``usage`` reads them (:func:`over_time_of`)."""
    return over_time_of(window_of(con, since, until, upstream), texts_of(con), buckets, top)


def over_time_of(
    window: Window, names: dict[int, str], buckets: int = 60, top: int = 3
) -> dict[str, list[float]]:
    """:func:`over_time` of a window already read."""
    import numpy as np

    c = window.cols
    if not len(c):
        return {"all": [0.0] * buckets}
    width = (window.until - window.since) / buckets
    at = np.clip(np.floor((c["t0"] - window.since) / width).astype(np.int64), 0, buckets - 1)
    tokens = c["prompt"].astype(np.float64) + c["output"]
    series = {"all": np.bincount(at, tokens, buckets).tolist()}
    clients, of = np.unique(c["client"], return_inverse=True)
    per = np.bincount(of.reshape(-1), tokens, len(clients))
    for i in sorted(range(len(clients)), key=lambda i: -per[i])[:top]:
        mine = of.reshape(-1) == i
        name = names.get(int(clients[i]), "(unknown)") if clients[i] >= 0 else "(none)"
        series[name] = np.bincount(at[mine], tokens[mine], buckets).tolist()
    return series
