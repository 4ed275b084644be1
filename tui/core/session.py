"""The session log: one JSON line per request, appended and flushed when it ends.

Each line is a self-contained record (schema ``SESSION_SCHEMA``): wall-clock time, engine
name/kind/model, the prompt and the full message list sent, the generation parameters,
the raw timeline (per-chunk timestamps in ns relative to the request being sent, with
each chunk's text and engine token count), the full text, the computed metrics, the
engine's own report, and the error if any. The file is opened in append mode and each
record is written with one ``write`` then flushed and fsynced, so a crash loses at most
the request in flight and never corrupts earlier lines. A process killed inside that
write (``kill -9`` during a large record) can leave a torn last line: the reader reports
it and keeps every complete record, and a recorder appending to such a file starts on a
new line, so the torn line never swallows the next record.
"""

from __future__ import annotations

import json
import os
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
) -> dict[str, Any]:
    """Build one session record (a plain JSON-able dict) for a finished request."""
    metrics = metrics or compute_metrics(timeline)
    prompt = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    return {
        "schema": SESSION_SCHEMA,
        "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "request_id": request_id,
        "slot": slot,
        "engine": engine,
        "kind": kind,
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
    }


class SessionRecorder:
    """Appends records to a JSONL file. Thread-safe; each append is flushed and fsynced."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.count = 0
        self._checked_tail = False

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line; raises OSError when the file cannot be written.

        Session logs hold prompts and answers: the file is created readable by its owner
        only (0600), in a folder created 0700."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self._checked_tail:
                if _ends_torn(self.path):
                    line = "\n" + line
                self._checked_tail = True
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            self.count += 1


def _ends_torn(path: Path) -> bool:
    """The file exists and its last line has no newline (a writer died inside it)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


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
