"""The bench's progress display on stderr: a rich progress bar with ETA, or plain lines.

rich comes with Textual; when it is missing (or stderr is not a terminal) progress is
printed as plain lines, one per stage, so logs stay readable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tui.bench.report.format import last_request_line
from tui.bench.run.results import BenchUpdate
from tui.core.safe_text import terminal_label


def _eta(s: float | None) -> str:
    if s is None:
        return "ETA —"
    m, sec = divmod(int(s + 0.5), 60)
    return f"ETA {m}:{sec:02d}"


def _last(u: BenchUpdate) -> str:
    return "" if u.record is None else last_request_line(u.record)


class PlainDisplay:
    def __init__(self) -> None:
        self._stage: tuple[str, str] | None = None

    def update(self, u: BenchUpdate) -> None:
        if u.message:
            self.message(u.message)
        if (u.engine, u.stage) != self._stage:
            self._stage = (u.engine, u.stage)
            print(f"[{u.done}/{u.total}] {u.engine} {u.stage} {_eta(u.eta_s)}", file=sys.stderr)

    def message(self, text: str) -> None:
        print(terminal_label(text, 2000), file=sys.stderr, flush=True)


class RichDisplay:
    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.task = progress.add_task("starting", total=None, eta="ETA —", last="")

    def update(self, u: BenchUpdate) -> None:
        if u.message:
            self.message(u.message)
        self.progress.update(
            self.task,
            completed=u.done,
            total=u.total or None,
            description=f"{u.engine} {u.stage}",
            eta=_eta(u.eta_s),
            last=_last(u),
        )

    def message(self, text: str) -> None:
        # a message may quote a server: terminal-safe, and no rich markup read in it
        self.progress.console.print(terminal_label(text, 2000), markup=False)


@contextmanager
def progress_display() -> Iterator[Any]:
    if not sys.stderr.isatty() and not os.environ.get("FORCE_TERMINAL"):
        yield PlainDisplay()  # (rich would say the same; its import is not needed here)
        return
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )
    except ImportError:
        yield PlainDisplay()
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        yield PlainDisplay()
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[eta]}"),
        TextColumn("{task.fields[last]}"),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        yield RichDisplay(progress)
