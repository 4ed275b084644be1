"""Keep engine stderr (C libraries writing to fd 2) off the terminal while the UI runs.

Textual draws by writing to ``sys.__stderr__``. llama.cpp and friends write notices
straight to file descriptor 2 (e.g. during model load), which would scribble over the
screen. :func:`engine_stderr_to` duplicates the terminal's fd 2 into a new file that
Textual uses, then points fd 2 itself at a log file; on exit both are restored.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def engine_stderr_to(log_path: Path) -> Iterator[Path | None]:
    """Run the body with fd 2 going to ``log_path`` and Textual drawing to the terminal.

    Yields the log path, or None when stderr is not a terminal (then nothing changes).
    """
    original = sys.__stderr__
    if original is None or not os.isatty(2):
        yield None
        return
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        yield None
        return
    original.flush()
    term_fd = os.dup(2)
    term = os.fdopen(term_fd, "w", encoding=original.encoding or "utf-8", errors="replace")
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.__stderr__ = term  # type: ignore[misc]  # Textual's driver picks the terminal up here
    try:
        yield log_path
    finally:
        term.flush()
        os.dup2(term_fd, 2)
        sys.__stderr__ = original  # type: ignore[misc]
        term.close()
