"""The session log: one JSON line per request, appended and flushed when it ends.

Each line is a self-contained record (schema ``SESSION_SCHEMA``): wall-clock time, engine
name/kind/build/model, the prompt and the full message list sent, the generation
parameters, the raw timeline (per-chunk timestamps in ns relative to the request being
sent, with each chunk's text and engine token count), the full text, the computed
metrics, the engine's own report, the error if any, and what disturbed it (a build
compiling beside it). The file is opened in append mode and each record is written with
one ``write`` then flushed and fsynced, so a crash loses at most the request in flight
and never corrupts earlier lines. A process killed inside that write (``kill -9`` during
a large record) can leave a torn last line: the reader reports it and keeps every
complete record, and a recorder appending to such a file starts on a new line, so the
torn line never swallows the next record.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tui.core.metrics import RequestMetrics, compute_metrics
from tui.core.timeline import RequestTimeline

SESSION_SCHEMA = 1


def session_record(
    *,
    engine: str,
    kind: str,
    model: str,
    messages: list[dict[str, str]],
    params: dict[str, Any],
    timeline: RequestTimeline,
    metrics: RequestMetrics | None = None,
    request_id: str = "",
    slot: str = "",
    build: str | None = None,
    disturbed: str | None = None,
) -> dict[str, Any]:
    """Build one session record (a plain JSON-able dict) for a finished request.
    ``build``: which build of the engine ran ("llama.cpp built for this CPU");
    ``disturbed``: what ran beside it while it streamed ("a build was compiling")."""
    metrics = metrics or compute_metrics(timeline)
    prompt = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    return {
        "schema": SESSION_SCHEMA,
        "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "request_id": request_id,
        "slot": slot,
        "engine": engine,
        "kind": kind,
        "build": build,
        "model": model,
        "prompt": prompt,
        "messages": messages,
        "params": params,
        "timeline": timeline.to_dict(),
        # the clock reading the timeline is relative to (perf_counter_ns: CLOCK_MONOTONIC
        # on Linux, shared by every process of this boot), for comparison with other stamps
        "t_sent_ns": timeline.t_sent_ns,
        "text": timeline.text,
        "metrics": metrics.to_dict(with_lists=False),
        "engine_truth": None if timeline.truth is None else timeline.truth.to_dict(),
        "error": timeline.error,
        "disturbed": disturbed,
    }


class SessionRecorder:
    """Appends records to a JSONL file. Thread-safe; each append is flushed and fsynced.

    Session logs (and the proxy's ``--events`` file, written through this class) hold
    prompts and answers, so the file is this user's alone: created 0600 in a folder
    created 0700; an existing file more open than that is narrowed to 0600; a path that
    is a symbolic link, not a regular file, or a file owned by another user is refused
    (an OSError whose ``strerror`` says which), checked on the opened file itself at
    every append, so a file swapped in meanwhile is refused too."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.count = 0
        self._checked_tail = False

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line; raises OSError when the file cannot be written
        or is refused (see the class docstring)."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = open_private(self.path)
            with os.fdopen(fd, "ab") as f:
                if not self._checked_tail:
                    if _ends_torn(fd):
                        line = "\n" + line
                    self._checked_tail = True
                f.write(line.encode("utf-8"))
                f.flush()
                os.fsync(fd)
            self.count += 1


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO put there must not hold the open
_PRIVATE_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | os.O_APPEND
    | getattr(os, "O_NOFOLLOW", 0)  # the last part of the path may not be a link
    | getattr(os, "O_CLOEXEC", 0)
    | _NONBLOCK
)


def open_private(path: Path) -> int:
    """A descriptor appending to ``path`` (created 0600), a regular file of this user's
    only: refused (OSError, its ``strerror`` naming why) when ``path`` is a symbolic
    link, not a regular file, or owned by another user; an existing file readable or
    writable by others is narrowed to 0600 (``fchmod`` on the opened file)."""
    try:
        fd = os.open(path, _PRIVATE_FLAGS, 0o600)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK) and path.is_symlink():
            raise OSError(e.errno, "is a symbolic link: refused", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file: refused", str(path))
        uid = os.getuid() if hasattr(os, "getuid") else None
        if uid is not None and st.st_uid != uid:
            raise OSError(
                errno.EPERM, f"owned by another user (uid {st.st_uid}): refused", str(path)
            )
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _ends_torn(fd: int) -> bool:
    """The open file is not empty and its last line has no newline (a writer died
    inside it)."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def default_session_path(session_dir: str | None) -> Path:
    """A new session file name in ``session_dir`` (or the platform data dir)."""
    if session_dir:
        base = Path(session_dir).expanduser()
    else:
        import platformdirs

        base = Path(platformdirs.user_data_dir("infertop")) / "sessions"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return base / f"session-{stamp}-{os.getpid()}.jsonl"


@dataclass
class SessionReadResult:
    records: list[dict[str, Any]]
    bad_lines: list[int]  # 1-based line numbers that were not valid records
    reasons: dict[int, str] = field(default_factory=dict)  # line number -> what is wrong

    def describe_bad(self, path: str | os.PathLike[str], most: int = 5) -> str:
        """One line naming the file and the first ``most`` bad lines, with why."""
        shown = "; ".join(
            f"line {n}: {self.reasons.get(n, 'unreadable')}" for n in self.bad_lines[:most]
        )
        more = f"; {len(self.bad_lines) - most} more" if len(self.bad_lines) > most else ""
        return f"{path}: skipped {len(self.bad_lines)} line(s) ({shown}{more})"


def read_session(path: str | os.PathLike[str]) -> SessionReadResult:
    """Read a session file; a line that is not a usable record (not JSON, nested too
    deep, a number too long, a field of the wrong type or not finite: see
    tui/core/session_check.py) is reported with its number and why, never fatal."""
    from tui.core.session_check import record_problem

    records: list[dict[str, Any]] = []
    bad: list[int] = []
    reasons: dict[int, str] = {}
    for i, line in _lines(Path(path)):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except RecursionError:
            why: str | None = "JSON nested too deeply"
        except ValueError as e:  # JSONDecodeError, or an integer of over 4300 digits
            why = f"not JSON ({' '.join(str(e).split())[:80]})"
        else:
            why = record_problem(rec)
        if why is not None:
            bad.append(i)
            reasons[i] = why
            continue
        records.append(rec)
    return SessionReadResult(records, bad, reasons)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("r", encoding="utf-8", errors="replace") as f:
        yield from enumerate(f, start=1)
