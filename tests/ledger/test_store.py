"""The ledger's file: private like the session log (links, other users' files refused),
versioned (an older file upgrades, a newer one is refused), a corrupt one named, and two
writer processes sharing it without a lost row."""

from __future__ import annotations

import os
import pwd
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ledger.ledger_support import outcome
from tui.ledger.retention import Retention, prune, used_bytes
from tui.ledger.store import MIGRATIONS, SCHEMA_VERSION, LedgerError, connect
from tui.ledger.usage import usage
from tui.ledger.writer import LedgerSink


def test_a_new_ledger_is_0600_in_a_0700_folder_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "data" / "ledger.sqlite3"
    con = connect(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    con.execute("INSERT INTO texts (text) VALUES ('x')")  # the WAL and shm now exist
    for companion in ("-wal", "-shm"):
        assert stat.S_IMODE(Path(f"{path}{companion}").stat().st_mode) == 0o600


def test_a_symlink_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    target.write_bytes(b"")
    link = tmp_path / "ledger.sqlite3"
    link.symlink_to(target)
    with pytest.raises(LedgerError, match="symbolic link"):
        connect(link)
    assert target.read_bytes() == b""
    dangling = tmp_path / "d.sqlite3"
    dangling.symlink_to(tmp_path / "nowhere.db")
    with pytest.raises(LedgerError, match="symbolic link"):
        connect(dangling)
    assert not (tmp_path / "nowhere.db").exists()
    ok = tmp_path / "ok.sqlite3"
    connect(ok).close()
    Path(f"{ok}-wal").unlink(missing_ok=True)
    Path(f"{ok}-wal").symlink_to(target)
    with pytest.raises(LedgerError, match="-wal: is a symbolic link"):
        connect(ok)


def test_a_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to give a file to another user")
    nobody = pwd.getpwnam("nobody")
    path = tmp_path / "ledger.sqlite3"
    connect(path).close()
    os.chown(path, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(LedgerError, match="owned by another user"):
        connect(path)
    with pytest.raises(LedgerError, match="owned by another user"):
        connect(path, create=False)


def test_a_corrupted_file_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"this is not SQLite at all " * 400)
    os.chmod(path, 0o600)
    with pytest.raises(LedgerError) as e:
        connect(path)
    assert str(path) in str(e.value) and "not a usable ledger" in str(e.value)


def test_an_older_file_is_upgraded_with_its_rows_and_a_newer_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    raw = sqlite3.connect(str(path))
    raw.executescript(MIGRATIONS[0])  # a file as schema version 1 made it
    raw.execute("INSERT INTO texts (text) VALUES ('alice')")
    raw.execute(
        "INSERT INTO requests (rid, source, state, client, t0, prompt_tokens, output_tokens) "
        "VALUES ('r1', 'proxy', 'done', 1, ?, 11, 22)",
        (time.time() - 10,),
    )
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    con = connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    cols = {r[1] for r in con.execute("PRAGMA table_info(requests)")}
    assert {"c_address", "streamed"} <= cols
    u = usage(con, time.time() - 60)
    assert [(g.key, g.prompt_tokens, g.output_tokens) for g in u.groups] == [(("alice",), 11, 22)]
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    with pytest.raises(LedgerError, match="newer than this infertop's"):
        connect(path)


def test_retention_by_age_then_by_size_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite3"
    sink = LedgerSink(path, Retention(keep_days=1000, max_mb=1000), queue_limit=10_000)
    now = time.time()
    for day in range(30):
        for _ in range(200):
            sink.publish(outcome(t0=now - day * 86_400 - 5))
    sink.flush()
    sink.close()
    con = connect(path)
    assert prune(con, Retention(keep_days=10, max_mb=1000), now) == 20 * 200  # days 10-29
    oldest = con.execute("SELECT MIN(t0) FROM requests").fetchone()[0]
    assert oldest > now - 10 * 86_400
    before = con.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    cap_mb = used_bytes(con) / 1024 / 1024 / 2
    prune(con, Retention(keep_days=10, max_mb=cap_mb), now)
    assert used_bytes(con) <= cap_mb * 1024 * 1024
    left = con.execute("SELECT COUNT(*), MIN(t0) FROM requests").fetchone()
    assert 0 < left[0] < before and left[1] > oldest  # the oldest went first


WRITER = """
import time
from tests.ledger.ledger_support import outcome
from tui.ledger.writer import LedgerSink
sink = LedgerSink(__import__("pathlib").Path({path!r}))
for i in range({n}):
    sink.publish(outcome({who!r}, prompt=1, output=i))
    if i % 50 == 0:
        time.sleep(0.01)
assert sink.flush(60)
sink.close()
print(sink.stats())
"""


def test_two_writer_processes_share_one_file_without_a_lost_row(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    root = str(Path(__file__).resolve().parents[2])
    n = 1500
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER.format(path=str(path), n=n, who=who)],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("one", "two")
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        assert "'written': 1500, 'dropped': 0, 'lost': 0" in out, out
    con = connect(path)
    u = usage(con, time.time() - 3600)
    got = {g.key[0]: (g.requests, g.output_tokens) for g in u.groups}
    assert got == {"one": (n, n * (n - 1) // 2), "two": (n, n * (n - 1) // 2)}
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
