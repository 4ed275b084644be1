"""Session logs (and the proxy's ``--events`` file, written by the same recorder) are
the user's alone: a symlink put where the file goes is refused (its target untouched),
a dangling one too (no file made elsewhere), an existing 0644 file is narrowed to 0600,
a FIFO is refused without waiting, and a file owned by another user is refused (run as
root: the file is chowned to ``nobody``). Real files, links and modes throughout."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tui.core.session import SessionRecorder


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_existing_0644_file_becomes_0600_and_keeps_its_lines(tmp_path: Path) -> None:
    """On main an existing file kept its mode: readable by every local user."""
    path = tmp_path / "events.jsonl"
    path.write_text('{"old": 1}\n')
    os.chmod(path, 0o644)
    SessionRecorder(path).append({"new": 2})
    assert _mode(path) == 0o600
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"old": 1}, {"new": 2}]


def test_a_new_file_is_0600_in_a_0700_folder(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "s.jsonl"
    SessionRecorder(path).append({"a": 1})
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700


def test_a_symlink_where_the_file_goes_is_refused(tmp_path: Path) -> None:
    """A link to a file of the user's (on main the record was appended to the target)."""
    target = tmp_path / "bashrc"
    target.write_text("echo hi\n")
    os.chmod(target, 0o644)
    link = tmp_path / "events.jsonl"
    link.symlink_to(target)
    with pytest.raises(OSError) as e:
        SessionRecorder(link).append({"prompt": "secret"})
    assert e.value.strerror == "is a symbolic link: refused"
    assert target.read_text() == "echo hi\n" and _mode(target) == 0o644


def test_a_dangling_symlink_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    """A link to where another user would read it (on main the file was created there)."""
    elsewhere = tmp_path / "shared" / "loot.jsonl"
    elsewhere.parent.mkdir()
    link = tmp_path / "events.jsonl"
    link.symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        SessionRecorder(link).append({"prompt": "secret"})
    assert not elsewhere.exists()


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    """A FIFO (held open both ways here, so that no open of it waits on main either)."""
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo, 0o600)
    reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        with pytest.raises(OSError) as e:
            SessionRecorder(fifo).append({"prompt": "secret"})
        assert e.value.strerror == "not a regular file: refused"
        with pytest.raises(BlockingIOError):
            os.read(reader, 100)  # nothing was written into it
    finally:
        os.close(reader)


def test_a_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    """Root can chown a file to ``nobody``; as another user the test has no way to make
    one it owns not its own, and is skipped."""
    import pwd

    if os.getuid() != 0:
        pytest.skip("needs root to give a file to another user")
    nobody = pwd.getpwnam("nobody")
    path = tmp_path / "events.jsonl"
    path.write_text("")
    os.chmod(path, 0o666)
    os.chown(path, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(OSError) as e:
        SessionRecorder(path).append({"prompt": "secret"})
    assert e.value.strerror == f"owned by another user (uid {nobody.pw_uid}): refused"
    assert path.read_text() == "" and _mode(path) == 0o666  # left as it was


def test_the_proxy_events_file_gets_the_same_rules(tmp_path: Path) -> None:
    """``proxy --events FILE`` writes through the recorder: a 0644 file is narrowed, a
    symlink refused (its error kept for the proxy to show)."""
    from tui.proxy.events_file import EventsWriter

    path = tmp_path / "events.jsonl"
    path.write_text("")
    os.chmod(path, 0o644)
    w = EventsWriter(path)
    w.put({"a": 1})
    w.close()
    assert _mode(path) == 0o600 and path.read_text() == '{"a":1}\n'
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    w = EventsWriter(link)
    w.put({"b": 2})
    w.close()
    assert w.error == f"{link}: is a symbolic link: refused"
    assert path.read_text() == '{"a":1}\n'
