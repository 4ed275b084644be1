"""Each ledger row keeps its request's verdict kind (schema version 4), where its place
gave one; a file of version 3 gains the column, its rows without one."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from pathlib import Path

from tests.ledger.ledger_support import outcome
from tui.core.verdict import Breakdown, Verdict
from tui.ledger.store import MIGRATIONS, SCHEMA_VERSION, connect
from tui.ledger.writer import LedgerSink


def test_a_row_keeps_the_verdict_kind(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite3"
    sink = LedgerSink(path)
    queued = Verdict("queued", "queued 1.3 s behind 1 busy slot (-np 1)", Breakdown())
    sink.publish(replace(outcome(source="bench"), id="waited", verdict=queued))
    sink.publish(replace(outcome(), id="none"))
    sink.close()
    con = sqlite3.connect(str(path))
    rows = dict(con.execute("SELECT rid, verdict FROM requests").fetchall())
    assert rows == {"waited": "queued", "none": None}


def test_a_version_3_file_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    raw = sqlite3.connect(str(path))
    for step in MIGRATIONS[:3]:
        raw.executescript(step)
    raw.execute("INSERT INTO texts (text) VALUES ('alice')")
    raw.execute(
        "INSERT INTO requests (rid, source, state, client, t0) "
        "VALUES ('r1', 'proxy', 'done', 1, ?)",
        (time.time() - 10,),
    )
    raw.execute("PRAGMA user_version = 3")
    raw.commit()
    raw.close()
    con = connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    assert con.execute("SELECT rid, verdict FROM requests").fetchall() == [("r1", None)]


def test_usage_groups_by_verdict_and_a_kind_not_ours_is_none(tmp_path: Path) -> None:
    """``--by verdict``: each kind of tui/core/verdict.py is its group; a row without one,
    or with a text no infertop wrote (a file from someone else), falls under ``(none)`` —
    never shown as it is."""
    from tui.ledger.usage import usage

    path = tmp_path / "l.sqlite3"
    sink = LedgerSink(path)
    queued = Verdict("queued", "queued 1.3 s behind 1 busy slot (-np 1)", Breakdown())
    hit = Verdict("cache-hit", "cache hit", Breakdown())
    for i, v in enumerate([queued, queued, hit, None, None]):
        sink.publish(replace(outcome(source="bench", output=10 + i), id=f"r{i}", verdict=v))
    sink.close()
    con = connect(path)
    con.execute("UPDATE requests SET verdict = ? WHERE rid = 'r4'", ("\x1b[2Jqueued",))
    u = usage(con, time.time() - 3600, time.time() + 1, ("verdict",))
    got = {g.key: (g.requests, g.output_tokens) for g in u.groups}
    assert got == {("queued",): (2, 21), ("cache-hit",): (1, 12), ("(none)",): (2, 27)}


def test_history_filters_by_verdict_and_reads_a_foreign_kind_as_none(tmp_path: Path) -> None:
    from tui.ledger.history import history

    path = tmp_path / "l.sqlite3"
    sink = LedgerSink(path)
    queued = Verdict("queued", "queued 1.3 s behind 1 busy slot (-np 1)", Breakdown())
    for i, v in enumerate([queued, None, queued]):
        sink.publish(replace(outcome(t0=time.time() - 60 + i), id=f"r{i}", verdict=v))
    sink.close()
    con = connect(path)
    con.execute("UPDATE requests SET verdict = ? WHERE rid = 'r2'", ("\x1b[2Jqueued",))
    assert {(r.rid, r.verdict) for r in history(con)} == {
        ("r0", "queued"), ("r1", None), ("r2", None),
    }  # fmt: skip
    assert [r.rid for r in history(con, verdict="queued")] == ["r0"]
    assert history(con, verdict="\x1b[2Jqueued") == []  # not a kind of ours: nothing
