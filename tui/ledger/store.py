"""The ledger's file: where it lives, opened privately, its schema and migrations.

One SQLite database (stdlib ``sqlite3``) in WAL mode, by default
``platformdirs.user_data_dir("infertop")/ledger.sqlite3`` beside the session logs.
It holds numbers and names only (:mod:`tui.ledger.columns`), yet who used which server
when is this user's business: the file is opened as the session log is
(:func:`tui.core.session.open_private`) — created 0600 in a 0700 folder, an existing one
narrowed to 0600, and refused when it is a symbolic link, not a regular file, or owned by
another user; its ``-wal`` and ``-shm`` files, where they exist, are held to the same
rules, and the file SQLite opened is checked to be the one that was checked.

**Schema versions** (``PRAGMA user_version``): :data:`MIGRATIONS` lists every step from
an empty file; opening a file at an older version runs the steps it lacks, in one
transaction (a second process opening it at the same time waits, then finds it done); a
file of a newer version than this infertop knows is refused (:class:`LedgerError`) rather
than written in a shape its writer would not expect. Several processes (two proxies, a
proxy and the TUI) may share one file: each writes in short ``BEGIN IMMEDIATE``
transactions and waits up to :data:`BUSY_TIMEOUT_MS` for another's.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path
from typing import Final

from tui.core.session import open_private

SCHEMA_VERSION: Final = 4
BUSY_TIMEOUT_MS: Final = 10_000
LEDGER_FILE: Final = "ledger.sqlite3"
SECRET_FILE: Final = "client-secret"

# Schema version 1: requests with their numbers and names (names through ``texts``).
_V1: Final = """
CREATE TABLE texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
CREATE TABLE requests (
    id INTEGER PRIMARY KEY,
    rid TEXT NOT NULL,
    source TEXT NOT NULL,
    state TEXT NOT NULL,
    error_kind INTEGER,
    route INTEGER,
    api INTEGER,
    upstream INTEGER,
    model INTEGER,
    client INTEGER NOT NULL,
    c_name INTEGER,
    c_user INTEGER,
    c_key INTEGER,
    c_program INTEGER,
    c_process INTEGER,
    t0 REAL NOT NULL,
    e2e_s REAL,
    ttft_s REAL,
    ttfo_s REAL,
    decode_tps REAL,
    itl_p50_s REAL,
    itl_p90_s REAL,
    prompt_tokens INTEGER,
    cached_tokens INTEGER,
    output_tokens INTEGER,
    output_est INTEGER,
    reasoning_tokens INTEGER,
    reasoning_est INTEGER,
    truth_source INTEGER,
    truth_prompt_ms REAL,
    truth_prompt_eval INTEGER,
    truth_output INTEGER,
    truth_decode_tps REAL
);
CREATE INDEX requests_t0 ON requests (t0);
"""
# Version 2: the client's address, whether the answer was streamed (a TTFT only then),
# and the device energy spans busy time's joules are attributed from.
_V2: Final = """
ALTER TABLE requests ADD COLUMN c_address INTEGER;
ALTER TABLE requests ADD COLUMN streamed INTEGER;
CREATE TABLE energy (
    id INTEGER PRIMARY KEY,
    upstream INTEGER NOT NULL,
    t0 REAL NOT NULL,
    t1 REAL NOT NULL,
    joules REAL NOT NULL,
    source INTEGER
);
CREATE INDEX energy_t0 ON energy (upstream, t0);
"""


def hour_sql(t: str) -> str:
    """SQL for the UTC hour a time (epoch seconds) falls in, ⌊t / 3600⌋ — the same as
    Python's ``t // 3600`` (a quotient that rounds up onto the next hour is corrected)."""
    q = f"CAST({t} / 3600 AS INTEGER)"
    return f"({q} - ({t} < {q} * 3600))"


def _end(row: str) -> str:
    return f"({row}.t0 + MAX(COALESCE({row}.e2e_s, 0), 0))"


# Packs are valid only while the rows they were made from are as they were: any request
# added, removed or changed drops the pack of its own hour and every pack whose requests
# were in flight with it (their busy shares change); an energy span does the same over
# its span (their joules change). Recent packs by their hour (the hour key's range), the
# rare packs whose requests ran on past LONG_H hours by a partial index of their own.
LONG_H: Final = 6


def _drop_packs(row: str, t0: str, t1: str) -> str:
    h0, h1 = hour_sql(t0), hour_sql(t1)
    own = f" OR hour = {h0}" if row else ""
    return (
        f"DELETE FROM packs WHERE hour BETWEEN {h0} - {LONG_H} AND {h1} AND (reach > {t0}{own});\n"
        f"DELETE FROM packs WHERE reach > (hour + {LONG_H + 1}) * 3600 AND reach > {t0} "
        f"AND hour * 3600 < {t1};\n"
    )


def _hour_reach(row: str) -> str:
    return (
        f"INSERT INTO hours (hour, reach) VALUES ({hour_sql(row + '.t0')}, {_end(row)}) "
        "ON CONFLICT (hour) DO UPDATE SET reach = MAX(reach, excluded.reach);\n"
    )


# Version 3: the hour packs (tui/ledger/packs.py) — every request's numbers, an hour of
# them in one blob, with its busy share — and ``hours``: each hour's latest request end
# (for the requests a share depends on), kept by triggers, filled here from the rows.
_V3: Final = (
    "CREATE TABLE hours (hour INTEGER PRIMARY KEY, reach REAL NOT NULL);\n"
    "CREATE TABLE packs (hour INTEGER PRIMARY KEY, format INTEGER NOT NULL, "
    "reach REAL NOT NULL, requests INTEGER NOT NULL, data BLOB NOT NULL);\n"
    f"CREATE INDEX packs_long ON packs (reach) WHERE reach > (hour + {LONG_H + 1}) * 3600;\n"
    f"INSERT INTO hours (hour, reach) SELECT {hour_sql('t0')}, MAX({_end('requests')}) "
    "FROM requests GROUP BY 1;\n"
    "CREATE TRIGGER requests_added AFTER INSERT ON requests BEGIN\n"
    + _hour_reach("NEW")
    + _drop_packs("NEW", "NEW.t0", _end("NEW"))
    + "END;\nCREATE TRIGGER requests_removed AFTER DELETE ON requests BEGIN\n"
    + _drop_packs("OLD", "OLD.t0", _end("OLD"))
    + "END;\nCREATE TRIGGER requests_changed AFTER UPDATE ON requests BEGIN\n"
    + _hour_reach("NEW")
    + _drop_packs("OLD", "OLD.t0", _end("OLD"))
    + _drop_packs("NEW", "NEW.t0", _end("NEW"))
    + "END;\nCREATE TRIGGER energy_added AFTER INSERT ON energy BEGIN\n"
    + _drop_packs("", "NEW.t0", "NEW.t1")
    + "END;\nCREATE TRIGGER energy_removed AFTER DELETE ON energy BEGIN\n"
    + _drop_packs("", "OLD.t0", "OLD.t1")
    + "END;\n"
)
# Version 4: each request's verdict kind (tui/core/verdict.py), where its place gave one.
_V4: Final = "ALTER TABLE requests ADD COLUMN verdict TEXT;\n"
MIGRATIONS: Final[tuple[str, ...]] = (_V1, _V2, _V3, _V4)  # MIGRATIONS[k] takes version k to k + 1


class LedgerError(Exception):
    """The ledger cannot be used; the message names the file and why."""


def default_ledger_path() -> Path:
    """``user_data_dir("infertop")/ledger.sqlite3`` (the session logs' folder's parent)."""
    return data_dir() / LEDGER_FILE


def data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("infertop"))


def _check_companion(path: Path) -> None:
    """A ``-wal``/``-shm`` file that exists must be a regular file of this user's."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise LedgerError(f"{path}: is a symbolic link: refused")
    if not stat.S_ISREG(st.st_mode):
        raise LedgerError(f"{path}: not a regular file: refused")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise LedgerError(f"{path}: owned by another user (uid {st.st_uid}): refused")
    if st.st_mode & 0o077:
        os.chmod(path, 0o600)


def check_private(path: Path, create: bool) -> tuple[int, int]:
    """Make or check the ledger file as the module docstring says; (device, inode) of
    the file checked. ``create`` False: a missing file is a LedgerError."""
    if not create and not path.exists() and not path.is_symlink():
        raise LedgerError(f"{path}: no ledger here yet (nothing has been recorded)")
    if create:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as e:
            raise LedgerError(f"{path.parent}: cannot make the folder: {e.strerror}") from None
    try:
        fd = open_private(path) if create else _open_to_read(path)
    except OSError as e:
        why = e.strerror or str(e)
        if e.errno in (errno.EROFS, errno.EACCES):
            why = f"cannot be {'written' if create else 'read'}: {why}"
        raise LedgerError(f"{path}: {why}") from None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        _check_companion(Path(f"{path}{suffix}"))
    return st.st_dev, st.st_ino


def _open_to_read(path: Path) -> int:
    """A read descriptor on ``path``, with open_private's refusals (a link, not a regular
    file, another user's)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK) and path.is_symlink():
            raise OSError(e.errno, "is a symbolic link: refused", str(path)) from None
        raise
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "not a regular file: refused"
    elif hasattr(os, "getuid") and st.st_uid != os.getuid():
        why = f"owned by another user (uid {st.st_uid}): refused"
    if why is not None:
        os.close(fd)
        raise OSError(errno.EPERM, why, str(path))
    return fd


def connect(path: Path, create: bool = True) -> sqlite3.Connection:
    """A connection to the ledger at ``path``, private, in WAL mode, its schema current
    (older: upgraded; newer or not a database: LedgerError naming the file)."""
    ident = check_private(path, create)
    try:
        con = sqlite3.connect(
            str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as e:
        raise LedgerError(f"{path}: cannot open the ledger: {e}") from None
    try:
        st = os.lstat(path)
        if (st.st_dev, st.st_ino) != ident or stat.S_ISLNK(st.st_mode):
            raise LedgerError(f"{path}: the file changed while it was opened: refused")
        con.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _prepare(con, path)
    except LedgerError:
        con.close()
        raise
    except sqlite3.DatabaseError as e:
        con.close()
        why = f"not a usable ledger ({e}); move it away or use --ledger"
        raise LedgerError(f"{path}: {why}") from None
    except sqlite3.Error as e:  # pragma: no cover - any other SQLite fault
        con.close()
        raise LedgerError(f"{path}: {e}") from None
    return con


def _prepare(con: sqlite3.Connection, path: Path) -> None:
    """WAL, then the schema brought to :data:`SCHEMA_VERSION` (see the module docstring)."""
    version = int(con.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise LedgerError(_newer(path, version))
    if version == 0:
        con.execute("PRAGMA auto_vacuum = INCREMENTAL")  # (only before the first table)
    mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise LedgerError(f"{path}: SQLite would not use WAL here (journal mode {mode})")
    con.execute("PRAGMA synchronous = NORMAL")
    if version == SCHEMA_VERSION:
        return
    con.execute("BEGIN IMMEDIATE")
    try:
        version = int(con.execute("PRAGMA user_version").fetchone()[0])  # another may have
        if version > SCHEMA_VERSION:
            raise LedgerError(_newer(path, version))
        for step in range(version, SCHEMA_VERSION):
            for statement in statements(MIGRATIONS[step]):
                con.execute(statement)
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def statements(script: str) -> list[str]:
    """A script's statements, one by one (a trigger's body keeps its own ``;``), to run
    inside the migration's transaction (``executescript`` would commit first)."""
    out: list[str] = []
    buf = ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n;"):
                out.append(buf.strip())
            buf = ""
    return out


def _newer(path: Path, version: int) -> str:
    return (
        f"{path}: ledger schema version {version} is newer than this infertop's "
        f"({SCHEMA_VERSION}): refused (upgrade infertop, or use another --ledger)"
    )
