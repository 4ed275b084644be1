"""Keep engine stderr (C libraries writing to fd 2) off the terminal while the UI runs,
and say on the terminal where a crash of the UI went.

Textual draws by writing to ``sys.__stderr__``. llama.cpp and friends write notices
straight to file descriptor 2 (e.g. during model load), which would scribble over the
screen. :func:`engine_stderr_to` duplicates the terminal's fd 2 into a new file that
Textual uses, then points fd 2 itself at a log file; on exit both are restored.

So the traceback Textual prints when the UI stops on an error goes to that log too, and
the terminal, restored, showed nothing: the app had simply gone. :func:`say_crash` (the
app calls it when it ends with a non-zero exit code, after Textual has given the
terminal back) writes two lines to the real terminal: the error, and the log that holds
its traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from tui.core.safe_text import terminal_label

_log: Path | None = None  # where fd 2 goes while engine_stderr_to runs (None: the terminal)


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
    global _log
    _log = log_path
    try:
        yield log_path
    finally:
        _log = None
        term.flush()
        os.dup2(term_fd, 2)
        sys.__stderr__ = original  # type: ignore[misc]
        term.close()


def crash_lines(code: int, error: BaseException | None, log: Path) -> list[str]:
    """What the terminal says when the UI stopped on an error: the error (one line,
    terminal-safe: an error may quote a server) and where its traceback is."""
    what = f"{type(error).__name__}: {error}" if error is not None else "an error"
    return [
        f"infertop: the terminal UI stopped on {terminal_label(what, 500)} (exit code {code})",
        f"infertop: its traceback is in {terminal_label(str(log), 1000)}",
    ]


def say_crash(code: int, error: BaseException | None) -> None:
    """After the UI ended with exit code ``code`` (Textual has restored the terminal):
    when fd 2 goes to a log (:func:`engine_stderr_to`), where Textual wrote the
    traceback, say so on the terminal. Elsewhere the traceback is on stderr already."""
    term = sys.__stderr__
    if code == 0 or _log is None or term is None:
        return
    try:
        term.write("".join(f"{line}\n" for line in crash_lines(code, error, _log)))
        term.flush()
    except (OSError, ValueError):  # a terminal gone (hung up): nothing to tell
        pass
