"""The device's energy into the ledger (tui/ledger/energy_feed.py) from a real
EnergyTrack fed readings of a known counter, then split among the requests in flight
by usage — the same way as busy time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.ledger.ledger_support import outcome
from tui.core.energy import EnergyReading
from tui.ledger.energy_feed import EnergyFeed, track_window
from tui.ledger.store import connect
from tui.ledger.usage import usage
from tui.ledger.writer import LedgerSink
from tui.telemetry.energy_track import EnergyTrack

UP = "http://127.0.0.1:8080"


class Sample:
    """What the track reads of a hardware sample: a counter at 100 W from t = 0."""

    def __init__(self, t: float) -> None:
        self.t, self.source = t, "test box"

    def energy_readings(self) -> tuple[EnergyReading, ...]:
        return (EnergyReading("GPU0 test", joules=100.0 * self.t, counter_source="test counter"),)


def test_spans_of_a_counter_become_joules_per_client(tmp_path: Path) -> None:
    sink = LedgerSink(tmp_path / "l.sqlite3")
    track = EnergyTrack()
    feed = EnergyFeed(sink, lambda: UP, track_window(track), track.latest_t, every_s=3600)
    for t in (1000.0, 1002.0, 1004.0, 1006.0):  # readings every 2 s
        track.push(Sample(t))  # type: ignore[arg-type]
        feed.close_span()
    assert feed.spans == 3
    # the requests, on the wall clock the spans were placed on
    con = sink.con
    sink.flush()
    (a0, a1) = con.execute("SELECT MIN(t0), MAX(t1) FROM energy").fetchone()
    assert a1 - a0 == pytest.approx(6.0, abs=1e-5)
    sink.publish(outcome("A", t0=a0 + 1, e2e_s=4.0))  # A alone 1 s, then with B 2 s...
    sink.publish(outcome("B", t0=a0 + 2, e2e_s=2.0))
    sink.publish(outcome("C", t0=a0 + 1, e2e_s=1.0, upstream="http://elsewhere:1"))
    sink.flush()
    sink.close()
    u = usage(connect(tmp_path / "l.sqlite3"), a0 - 10, time.time() + 10)
    got = {g.key[0]: g for g in u.groups}
    # 100 W: A alone [1, 2) 100 J, shared [2, 4) 100 J each, A alone [4, 5) 100 J
    assert got["A"].joules == pytest.approx(300.0, rel=1e-6)
    assert got["B"].joules == pytest.approx(100.0, rel=1e-6)
    assert got["C"].joules is None  # no energy source for that engine: none, never guessed
    assert u.total.joules == pytest.approx(400.0, rel=1e-6)


def test_no_reading_no_span() -> None:
    spans: list[object] = []

    class Sink:
        def energy(self, span: object) -> None:
            spans.append(span)

    track = EnergyTrack()
    feed = EnergyFeed(Sink(), lambda: UP, track_window(track), track.latest_t, every_s=3600)
    feed.close_span()
    feed.close_span()
    assert spans == []
