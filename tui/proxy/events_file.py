"""``--events FILE``: one JSON line per finished request, written as the session log is.

Each line is the request's session record (:meth:`ProxiedRequest.summary`: the timeline,
metrics and engine report, its text withheld), appended, flushed and fsynced by
:class:`~tui.core.session.SessionRecorder` (0600 file, 0700 folder). The writes happen
on a thread of their own, so a slow disk never holds up a stream being forwarded; the
queue to it holds at most :data:`QUEUE_LIMIT` records, and a record that finds it full
is counted in :attr:`EventsWriter.dropped` rather than kept.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

from tui.core.session import SessionRecorder

QUEUE_LIMIT = 10_000


class EventsWriter:
    """Appends records to ``path`` from a daemon thread."""

    def __init__(self, path: str | Path) -> None:
        self.recorder = SessionRecorder(path)
        self.path = self.recorder.path
        self.dropped = 0
        self.error: str | None = None  # the last write error, in words
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_LIMIT)
        self._thread = threading.Thread(target=self._run, name="proxy-events", daemon=True)
        self._thread.start()

    def put(self, record: dict[str, Any]) -> None:
        """Queue one record (never blocks)."""
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            rec = self._queue.get()
            if rec is None:
                return
            try:
                self.recorder.append(rec)
            except OSError as e:
                self.error = f"{self.path}: {e.strerror or e}"
            except (TypeError, ValueError) as e:  # a value JSON cannot hold: a bug
                self.error = f"{self.path}: record not written ({e})"

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop the thread."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    @property
    def written(self) -> int:
        return self.recorder.count
