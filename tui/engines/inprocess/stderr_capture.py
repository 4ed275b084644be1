"""Keep native-library chatter (llama.cpp logs) off the terminal.

llama.cpp writes to file descriptor 2 directly, so ``sys.stderr`` redirection does not
catch it. :func:`captured_stderr` points fd 2 at a temporary file for the duration of a
block and returns what was written, so a failed model load can still say why.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator

_lock = threading.Lock()


class CapturedText:
    """Filled with what the block wrote to fd 2 once the block exits."""

    text: str = ""

    def last_line(self) -> str:
        lines = [ln.strip() for ln in self.text.splitlines() if ln.strip()]
        return lines[-1] if lines else ""


@contextlib.contextmanager
def captured_stderr(enabled: bool = True) -> Iterator[CapturedText]:
    """Redirect fd 2 to a temp file inside the block (process-wide; serialised by a lock)."""
    captured = CapturedText()
    if not enabled:
        yield captured
        return
    with _lock, tempfile.TemporaryFile(mode="w+b") as sink:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            yield captured
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")
