"""The ledger: one row per outcome, written off the caller's path in batches, read back by
``usage``; numbers and names only; a bounded queue; failures said once."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.ledger.ledger_support import outcome
from tui.core.outcome import ClientIdentity
from tui.ledger.store import connect
from tui.ledger.usage import usage
from tui.ledger.writer import EnergySpan, LedgerSink


def test_each_outcome_is_one_row_and_usage_adds_them_up(tmp_path: Path) -> None:
    sink = LedgerSink(tmp_path / "l.sqlite3")
    now = time.time()
    for _ in range(3):
        sink.publish(outcome("alice", t0=now - 100, prompt=10, output=20, cached=4))
    sink.publish(outcome("bob", t0=now - 50, prompt=7, output=5, estimated=True))
    sink.publish(outcome("bob", t0=now - 40, state="failed", output=None, prompt=None))
    sink.publish(outcome("bob", t0=now - 30, streamed=False, ttft_ms=900.0))
    assert sink.flush()
    sink.close()
    assert sink.stats()["written"] == 6
    con = connect(tmp_path / "l.sqlite3")
    u = usage(con, now - 3600)
    got = {g.key: g.to_dict(u.by) for g in u.groups}
    a, b = got[("alice",)], got[("bob",)]
    assert (a["requests"], a["prompt_tokens"], a["output_tokens"], a["cached_tokens"]) == (
        3,
        30,
        60,
        12,
    )
    assert (b["requests"], b["failed"], b["prompt_tokens"], b["output_tokens"]) == (3, 1, 17, 25)
    assert b["output_estimated"] == 5 and a["output_estimated"] == 0
    assert b["ttft_p50_s"] == pytest.approx(0.1)  # the answer not streamed has no TTFT
    assert u.total.requests == 6 and u.total.output_tokens == 85
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_busy_time_and_energy_are_attributed_per_client(tmp_path: Path) -> None:
    sink = LedgerSink(tmp_path / "l.sqlite3")
    t = time.time() - 100
    sink.publish(outcome("A", t0=t, e2e_s=4.0))
    sink.publish(outcome("B", t0=t + 2, e2e_s=2.0))
    sink.publish(outcome("C", t0=t, e2e_s=1.0, upstream="http://other:1"))  # another engine
    sink.energy(EnergySpan("http://127.0.0.1:8080", t, t + 4, 400.0, "test meter"))
    sink.flush()
    sink.close()
    u = usage(connect(tmp_path / "l.sqlite3"), t - 1)
    busy = {g.key[0]: g.busy_s for g in u.groups}
    joules = {g.key[0]: g.joules for g in u.groups}
    assert busy == pytest.approx({"A": 3.0, "B": 1.0, "C": 1.0})
    assert joules["A"] == pytest.approx(300.0) and joules["B"] == pytest.approx(100.0)
    assert joules["C"] is None  # no energy source for that engine: absent, never guessed
    assert u.busy_wall_s == pytest.approx(5.0)


def test_nothing_but_numbers_and_names_reaches_the_file(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite3"
    sink = LedgerSink(path)
    hostile = "x'); DROP TABLE requests; --\x1b[31m\x07" + "u" * 5000
    o = outcome(ClientIdentity(user=hostile[:200], program="curl"))
    sink.publish(o)
    sink.flush()
    sink.close()
    con = connect(path)
    (user,) = con.execute("SELECT text FROM texts WHERE text LIKE 'x%'").fetchone()
    assert user == hostile[:200]  # kept as given (bounded), only ever a parameter
    assert con.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 1


def test_a_full_queue_drops_and_says_so_once(tmp_path: Path) -> None:
    notes: list[str] = []
    sink = LedgerSink(tmp_path / "l.sqlite3", note=notes.append, queue_limit=5)
    # (a busy timeout: the writer's thread may hold the file a moment as it starts)
    other = sqlite3.connect(str(tmp_path / "l.sqlite3"), timeout=30, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process holds the file: the writer waits
    try:
        for _ in range(50):
            sink.publish(outcome())
        assert 40 <= sink.dropped <= 45
        assert sum("wait to be written" in n for n in notes) == 1
    finally:
        other.execute("COMMIT")
    assert sink.flush()
    sink.close()
    assert sink.written + sink.dropped == 50


def test_a_write_that_fails_is_said_once_and_recording_resumes(tmp_path: Path) -> None:
    notes: list[str] = []
    sink = LedgerSink(tmp_path / "l.sqlite3", note=notes.append)
    pages = sink.con.execute("PRAGMA page_count").fetchone()[0]
    sink.con.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk is full"
    for _ in range(200):
        sink.publish(outcome(ClientIdentity(user="u" * 150)))
        sink.flush()
    assert sink.lost > 0
    failing = [n for n in notes if "cannot record" in n]
    assert len(failing) == 1 and "full" in failing[0], notes
    sink.con.execute("PRAGMA max_page_count = 1073741823")
    sink.publish(outcome())
    sink.flush()
    sink.close()
    assert any("recording again" in n for n in notes)
    assert sink.written + sink.lost == 201


def test_percentiles_ranked_in_sql_equal_the_ones_defined_in_core(tmp_path: Path) -> None:
    import random

    from tui.core.stats import percentile

    rng = random.Random(5)
    sink = LedgerSink(tmp_path / "l.sqlite3")
    values: dict[str, list[float]] = {"a": [], "b": []}
    now = time.time()
    for i in range(301):
        who = "ab"[i % 2] if i < 300 else "a"
        ms = rng.choice([rng.uniform(10, 900), 250.0])  # ties too
        values[who].append(ms / 1000)
        sink.publish(outcome(who, t0=now - 500 + i, ttft_ms=ms))
    sink.flush()
    sink.close()
    u = usage(connect(tmp_path / "l.sqlite3"), now - 3600)
    for g in u.groups:
        d = g.to_dict(u.by)
        for q in (50, 95):
            assert d[f"ttft_p{q}_s"] == pytest.approx(percentile(values[g.key[0]], q), abs=1e-6)
    every = values["a"] + values["b"]
    assert u.total.to_dict(())["ttft_p95_s"] == pytest.approx(percentile(every, 95), abs=1e-6)


def test_a_requests_share_is_its_own_whatever_the_window(tmp_path: Path) -> None:
    """Busy shares are over every request of the engine the ledger holds: B, sent inside
    the window while A (sent before it) was in flight, gets half of their overlap — as
    in a window that holds both — not the whole of it."""
    sink = LedgerSink(tmp_path / "l.sqlite3")
    t = time.time() - 100
    sink.publish(outcome("A", t0=t, e2e_s=4.0))
    sink.publish(outcome("B", t0=t + 2, e2e_s=2.0))
    sink.flush()
    sink.close()
    con = connect(tmp_path / "l.sqlite3")
    inside = usage(con, t + 1, t + 10)
    assert [(g.key, g.busy_s) for g in inside.groups] == [(("B",), pytest.approx(1.0))]
    assert inside.busy_wall_s == pytest.approx(1.0)
    both = {g.key[0]: g.busy_s for g in usage(con, t - 1, t + 10).groups}
    assert both == pytest.approx({"A": 3.0, "B": 1.0})
