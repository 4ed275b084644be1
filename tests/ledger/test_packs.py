"""The hour packs (tui/ledger/packs.py, shares.py): ``usage`` read from packs and rows
equals the same numbers computed from the rows alone in plain Python (tests/ledger/
reference.py) — sums exactly, percentiles and busy shares to rounding — over random
schedules (requests that cross hours, run for hours, arrive late and out of order; two
engines; overlapping energy spans) and random windows that start and end inside hours;
a change to a row drops exactly the packs it touches; a damaged pack is read from the
rows; packs follow retention; a schema-2 file gets its packs after the upgrade."""

from __future__ import annotations

import random
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.ledger.ledger_support import outcome, writing_as_version_3
from tests.ledger.reference import reference
from tui.core.outcome import RequestOutcome
from tui.core.verdict import VERDICT_KINDS, Breakdown, Verdict
from tui.ledger import packs
from tui.ledger.packs import HOUR_S, hour_of
from tui.ledger.retention import Retention, prune
from tui.ledger.shares import build, drop_damaged, pack_due
from tui.ledger.store import MIGRATIONS, SCHEMA_VERSION, connect, hour_sql, statements
from tui.ledger.usage import usage, window_of
from tui.ledger.writer import EnergySpan, write_batch

ENGINES = ("http://127.0.0.1:8080", "http://10.0.0.7:8000")
CLIENTS = ("alice", "bob", "carol", "dave", "k:0123456789ab")
FIELDS = ("requests", "failed", "cancelled", "prompt_tokens", "cached_tokens", "output_tokens",
          "output_estimated", "reasoning_tokens", "reasoning_estimated")  # fmt: skip
QUANTILES = ("ttft_p50_s", "ttft_p95_s", "ttfo_p50_s", "ttfo_p95_s", "decode_tps_p50")


def _request(rng: random.Random, base: float, span_h: float) -> RequestOutcome:
    r = rng.random()
    if r < 0.8:
        e2e = rng.expovariate(1 / 40)
    elif r < 0.96:
        e2e = rng.uniform(600, 3 * 3600)  # crosses hours
    else:
        e2e = rng.uniform(7 * 3600, 9 * 3600)  # past the trigger's near range
    o = outcome(
        rng.choice(CLIENTS),
        t0=base + rng.uniform(0, span_h * 3600),
        e2e_s=e2e,
        prompt=rng.choice([None, rng.randint(1, 6000)]),
        output=rng.choice([None, rng.randint(0, 900), 2**40 + rng.randint(0, 9)]),
        estimated=rng.random() < 0.2,
        state=rng.choice(["done"] * 6 + ["failed", "cancelled"]),
        model=rng.choice(["m1", "m2", "m3"]),
        upstream=rng.choice(ENGINES),
        source=rng.choice(["proxy", "proxy", "chat", "bench"]),
        ttft_ms=rng.choice([None, 250.0, round(rng.uniform(5, 900), 4)]),
        cached=rng.choice([None, rng.randint(0, 50)]),
        streamed=rng.choice([True, True, False, None]),
    )
    o.metrics.decode_tps = rng.choice([None, 42.0, rng.uniform(5, 150)])
    if rng.random() < 0.3:
        o.metrics.reasoning_tokens = rng.randint(0, 400)
        o.metrics.reasoning_tokens_source = rng.choice(["usage", "chunk-count-estimate"])
    if rng.random() < 0.3:
        o.metrics.ttfo_ms = (o.metrics.ttft_ms or 0.0) + 31.0  # reasoning came first
    if rng.random() < 0.5:
        o = replace(o, verdict=Verdict(rng.choice(VERDICT_KINDS), "why", Breakdown()))
    return o


def _spans(rng: random.Random, base: float, span_h: float) -> list[EnergySpan]:
    out = []
    t = base
    while t < base + span_h * 3600 * 0.7:
        out.append(EnergySpan(ENGINES[0], t, t + 600, rng.uniform(1e3, 9e4), "meter"))
        t += 600
    for _ in range(5):  # a second process's spans, overlapping the first's
        a = base + rng.uniform(0, span_h * 3600)
        out.append(EnergySpan(ENGINES[0], a, a + rng.uniform(5, 900), rng.uniform(1, 9e4), "tui"))
    return out


def _fill(con: sqlite3.Connection, rng: random.Random, items: list[Any], packing: bool) -> None:
    """Written in random batches, roughly in the order requests end (late ones late),
    hours packed between batches."""
    items = sorted(items, key=lambda o: _end(o) + rng.uniform(-900, 900))
    while items:
        n = rng.randint(1, 40)
        write_batch(con, items[:n])
        items = items[n:]
        if packing and rng.random() < 0.3:
            pack_due(con)


def _end(item: Any) -> float:
    if isinstance(item, EnergySpan):
        return item.t1
    return float(item.t0_wall + (item.t_end_ns - item.t0_ns) / 1e9)


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert set(got) == set(want)
    for key, w in want.items():
        g = got[key]
        for f in FIELDS:
            assert g[f] == w[f], (key, f)
        for f in QUANTILES:
            assert (g[f] is None) == (w[f] is None), (key, f)
            if w[f] is not None:
                assert g[f] == pytest.approx(w[f], rel=1e-12, abs=1e-12), (key, f)
        assert g["busy_s"] == pytest.approx(w["busy_s"], rel=1e-9, abs=1e-9), key
        assert (g["joules"] is None) == (w["joules"] is None), key
        if w["joules"] is not None:
            assert g["joules"] == pytest.approx(w["joules"], rel=1e-9, abs=1e-6), key


def _by_client(
    con: sqlite3.Connection, since: float, until: float, by: str = "client"
) -> dict[str, Any]:
    u = usage(con, since, until, (by,))  # type: ignore[arg-type]
    return {g.key[0]: g.to_dict(u.by) for g in u.groups}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_usage_from_packs_and_rows_equals_the_rows_in_plain_python(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    base = (hour_of(time.time()) - 40) * HOUR_S + rng.uniform(0, 3600)
    con = connect(tmp_path / "l.sqlite3")
    items: list[Any] = [_request(rng, base, 20) for _ in range(260)]
    items += _spans(rng, base, 20)
    _fill(con, rng, items, packing=True)
    pack_due(con)
    late = [_request(rng, base, 20) for _ in range(6)]  # drop some packs after the last pass
    write_batch(con, late)  # type: ignore[arg-type]
    packed = from_rows = 0
    for _ in range(25):
        since = base - 600 + rng.uniform(0, 21 * 3600)
        until = since + rng.choice([rng.uniform(1, 3600), rng.uniform(3600, 30 * 3600)])
        _same(_by_client(con, since, until), reference(con, since, until))
        by = "verdict"
        _same(_by_client(con, since, until, by), reference(con, since, until, by))
        w = window_of(con, since, until)
        packed += w.packed_requests
        from_rows += w.row_requests
    assert packed > 0 and from_rows > 0  # both ways of reading were taken
    everything = _by_client(con, base - 3600, base + 40 * 3600)
    assert sum(g["requests"] for g in everything.values()) == 266


def test_a_late_request_drops_exactly_the_packs_it_was_in_flight_with(tmp_path: Path):
    con = connect(tmp_path / "l.sqlite3")
    h = hour_of(time.time()) - 30
    items = [outcome("a", t0=(h + k) * HOUR_S + 100 + 60 * i, e2e_s=30) for k in range(20)
             for i in range(3)]  # fmt: skip
    write_batch(con, items)  # type: ignore[arg-type]
    assert pack_due(con) == 20
    # one long request from hour h+3 to h+5's middle: hours h+3..h+5 change (shares, and
    # h+3 its own requests); a request of another hour that ended before it did not
    write_batch(con, [outcome("b", t0=(h + 3) * HOUR_S + 150, e2e_s=2 * HOUR_S)])
    left = {r for (r,) in con.execute("SELECT hour FROM packs")}
    assert left == {h + k for k in range(20)} - {h + 3, h + 4, h + 5}
    _same(
        _by_client(con, h * HOUR_S, (h + 20) * HOUR_S),
        reference(con, h * HOUR_S, (h + 20) * HOUR_S),
    )
    assert pack_due(con) == 3
    # one that ran for 9 hours, from hour h+8: reaches the packs through the long index
    write_batch(con, [outcome("c", t0=(h + 8) * HOUR_S + 5, e2e_s=9 * HOUR_S)])
    left = {r for (r,) in con.execute("SELECT hour FROM packs")}
    assert left == {h + k for k in range(20)} - set(range(h + 8, h + 18))
    pack_due(con)
    write_batch(con, [outcome("d", t0=(h + 19) * HOUR_S + 3000, e2e_s=1)])  # after c ended
    left = {r for (r,) in con.execute("SELECT hour FROM packs")}
    assert left == {h + k for k in range(19)}  # only its own hour
    _same(
        _by_client(con, h * HOUR_S, (h + 20) * HOUR_S),
        reference(con, h * HOUR_S, (h + 20) * HOUR_S),
    )


def test_every_pack_is_what_the_rows_make_now(tmp_path: Path):
    rng = random.Random(9)
    con = connect(tmp_path / "l.sqlite3")
    base = (hour_of(time.time()) - 30) * HOUR_S
    _fill(con, rng, [_request(rng, base, 20) for _ in range(200)] + _spans(rng, base, 20), True)
    pack_due(con)
    assert_packs_match_rows(con)


def assert_packs_match_rows(con: sqlite3.Connection) -> int:
    """Each pack decodes to what :func:`build` makes of its hour's rows now."""
    n = 0
    for hour, data in con.execute("SELECT hour, data FROM packs").fetchall():
        (records,) = packs.decode([bytes(data)])
        fresh, _t1 = build(con, hour * HOUR_S, (hour + 1) * HOUR_S)
        for name, kind in packs.FIELDS:
            got = records[name] if name in records.dtype.names else np.zeros(len(records))
            if kind == "i":
                assert np.array_equal(got, fresh[name]), (hour, name)
            else:
                assert np.allclose(got, fresh[name], rtol=1e-12, atol=1e-9), (hour, name)
        n += 1
    return n


def test_a_damaged_or_foreign_pack_is_read_from_the_rows(tmp_path: Path):
    con = connect(tmp_path / "l.sqlite3")
    h = hour_of(time.time()) - 10
    write_batch(con, [outcome("a", t0=(h + k) * HOUR_S + 10, output=k) for k in range(5)])  # type: ignore[arg-type]
    pack_due(con)
    want = reference(con, h * HOUR_S, (h + 5) * HOUR_S)
    con.execute("UPDATE packs SET data = substr(data, 1, 30) WHERE hour = ?", (h + 1,))
    con.execute("UPDATE packs SET data = X'4c50ff' || substr(data, 4) WHERE hour = ?", (h + 2,))
    w = window_of(con, h * HOUR_S, (h + 5) * HOUR_S)
    assert (w.packed_hours, w.row_requests) == (3, 2)
    _same(_by_client(con, h * HOUR_S, (h + 5) * HOUR_S), want)
    assert pack_due(con) == 0  # a pack is there, if damaged: the writer drops those first
    assert drop_damaged(con) == 2 and pack_due(con) == 2
    assert assert_packs_match_rows(con) == 5


def test_a_pack_keeps_every_value_exactly():
    rng = np.random.default_rng(3)
    n = 500
    cols: dict[str, Any] = {}
    for name, kind in packs.FIELDS:
        if kind == "f":
            cols[name] = rng.uniform(-1e9, 2e9, n)
        else:
            cols[name] = rng.integers(-(2**62), 2**62, n)
    cols["flags"] = rng.integers(0, 16, n)
    cols["cached"] = np.zeros(n, np.int64)  # not stored
    cols["model"] = rng.integers(-1, 100, n)  # one byte each
    (records,) = packs.decode([packs.encode(cols)])
    assert records.dtype.itemsize < 17 * 8 and "cached" not in records.dtype.names
    got = packs.Columns([records])
    for name, _kind in packs.FIELDS:
        assert np.array_equal(got[name], cols[name]), name


def test_the_hour_of_a_time_is_the_same_in_sql_and_python():
    con = sqlite3.connect(":memory:")
    for k in (0, 1, 480_000, 493_611):
        edge = float(k * 3600)
        for t in (edge, np.nextafter(edge, 0), np.nextafter(edge, 2 * edge + 1), edge - 1e-7,
                  edge + 1e-7, edge + 3599.9999999):  # fmt: skip
            got = con.execute(f"SELECT {hour_sql('?1')}", (float(t),)).fetchone()[0]
            assert got == hour_of(float(t)) == int(np.floor_divide(t, 3600)), (k, t)


def test_retention_takes_the_packs_with_the_rows(tmp_path: Path):
    rng = random.Random(4)
    con = connect(tmp_path / "l.sqlite3")
    now = time.time()
    base = (hour_of(now) - 72) * HOUR_S
    items = [_request(rng, base, 60) for _ in range(300)]
    write_batch(con, items)  # type: ignore[arg-type]
    pack_due(con, now)
    cut_days = (now - (base + 30 * 3600 + 1234.5)) / 86_400  # inside an hour
    prune(con, Retention(keep_days=cut_days, max_mb=1000), now)
    cutoff = now - cut_days * 86_400
    oldest = con.execute("SELECT MIN(t0) FROM requests").fetchone()[0]
    assert oldest >= cutoff
    hours = [h for (h,) in con.execute("SELECT hour FROM hours")]
    assert min(hours) == hour_of(oldest)
    assert (
        con.execute("SELECT COUNT(*) FROM packs WHERE hour < ?", (hour_of(cutoff),)).fetchone()[0]
        == 0
    )
    assert (
        con.execute("SELECT COUNT(*) FROM packs WHERE hour = ?", (hour_of(cutoff),)).fetchone()[0]
        == 0
    )
    _same(_by_client(con, base, now), reference(con, base, now))
    pack_due(con, now)
    assert assert_packs_match_rows(con) > 20
    _same(_by_client(con, base, now), reference(con, base, now))


def test_a_schema_2_file_is_upgraded_and_packed(tmp_path: Path):
    path = tmp_path / "v2.sqlite3"
    raw = sqlite3.connect(str(path), isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    for step in MIGRATIONS[:2]:
        for statement in statements(step):
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 2")
    rng = random.Random(5)
    base = (hour_of(time.time()) - 50) * HOUR_S
    items = [_request(rng, base, 40) for _ in range(300)] + _spans(rng, base, 40)
    with writing_as_version_3():
        write_batch(raw, items)  # the rows as infertop's schema 2 wrote them
    raw.execute(  # and one without an upstream or an end, as an older writer could
        "INSERT INTO requests (rid, source, state, client, t0, output_tokens) "
        "VALUES ('old', 'run', 'done', 1, ?, 7)",
        (base + 100,),
    )
    want = reference(raw, base - 1, base + 45 * 3600)
    raw.close()
    con = connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    assert con.execute("SELECT COUNT(*) FROM hours").fetchone()[0] > 30
    assert con.execute("SELECT COUNT(*) FROM packs").fetchone()[0] == 0
    _same(_by_client(con, base - 1, base + 45 * 3600), want)  # from the rows
    assert pack_due(con) > 30
    w = window_of(con, base - 1, base + 45 * 3600)
    assert w.row_requests == 0 and w.packed_requests == 301
    _same(_by_client(con, base - 1, base + 45 * 3600), want)  # from the packs
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


WRITER = """
import random, time
from pathlib import Path
from tests.ledger.ledger_support import outcome
from tui.ledger.writer import LedgerSink
rng = random.Random({seed})
sink = LedgerSink(Path({path!r}))
base = {base!r}
for i in range({n}):
    long = rng.random() < 0.05
    sink.publish(outcome(rng.choice(["a", "b", "c"]), t0=base + rng.uniform(0, 6 * 3600),
                         e2e_s=rng.uniform(600, 7200) if long else rng.uniform(0.1, 60),
                         prompt=rng.randint(1, 99), output=i, upstream={upstream!r}))
    if i % 40 == 0:
        time.sleep(0.02)
assert sink.flush(60)
sink.close()
print(sink.stats())
"""


def test_two_writers_and_a_packer_never_leave_a_stale_pack(tmp_path: Path):
    """Two writer processes add requests to hours that a third keeps packing (and the
    writers' own threads pack too): at the end every pack is what its rows make, no row
    is lost, and usage equals the rows in plain Python."""
    import subprocess
    import sys

    path = tmp_path / "shared.sqlite3"
    con = connect(path)
    root = str(Path(__file__).resolve().parents[2])
    base = (hour_of(time.time()) - 8) * HOUR_S
    n = 800
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER.format(path=str(path), n=n, seed=s, base=base, upstream=ENGINES[s % 2]),
            ],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for s in (1, 2)
    ]
    packed = 0
    while any(p.poll() is None for p in procs):
        packed += pack_due(con, lag_s=0)
        time.sleep(0.01)
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        assert f"'written': {n}, 'dropped': 0, 'lost': 0" in out, out
    assert packed > 0
    assert con.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 2 * n
    assert_packs_match_rows(con)
    w = window_of(con, base - 1, time.time())
    assert w.packed_requests > 0 and len(w.cols) == 2 * n
    _same(_by_client(con, base - 1, time.time()), reference(con, base - 1, time.time()))
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_absurd_rates_and_times_from_a_hostile_server_stay_in_range(tmp_path: Path):
    """A decode rate of 1e25 tokens/s (a server's word for its token count) neither wraps
    round to a negative (no value) nor breaks the percentiles: it stays the largest."""
    con = connect(tmp_path / "l.sqlite3")
    t = time.time() - 100
    sane, absurd = outcome("a", t0=t), outcome("a", t0=t + 1)
    absurd.metrics.decode_tps = 1e25
    write_batch(con, [sane, absurd])
    u = usage(con, t - 1, t + 10)
    assert u.groups[0].quantiles[("decode_tps", 50)] == pytest.approx((50.0 + 2**62 / 1e3) / 2)


def test_packs_of_the_older_format_are_read_from_the_rows_and_packed_again(tmp_path: Path):
    """A ledger packed before packs held verdicts (format 1): its hours are read from the
    rows — the verdicts there — until packed again, each hour's old pack replaced."""
    rng = random.Random(8)
    con = connect(tmp_path / "l.sqlite3")
    base = (hour_of(time.time()) - 30) * HOUR_S
    write_batch(con, [_request(rng, base, 20) for _ in range(200)])  # type: ignore[arg-type]
    hours = pack_due(con)
    assert hours > 10
    con.execute("UPDATE packs SET format = 1, data = X'4c5001' || substr(data, 4)")
    since, until = base - 3600, base + 30 * 3600
    w = window_of(con, since, until)
    assert w.packed_hours == 0 and w.row_requests == 200
    by = "verdict"
    _same(_by_client(con, since, until, by), reference(con, since, until, by))
    assert pack_due(con) == hours
    assert con.execute("SELECT COUNT(*), MIN(format) FROM packs").fetchone() == (hours, 2)
    assert window_of(con, since, until).packed_requests == 200
    _same(_by_client(con, since, until, by), reference(con, since, until, by))
    assert assert_packs_match_rows(con) == hours
