"""Conversation: the turns of one output pane; answers stream into Markdown widgets.

While an answer streams, its text is split at the last block boundary (a blank line):
the complete blocks before it go to the Markdown widget in batches (at most every
``COMMIT_S`` seconds, or sooner once the tail is over ``TAIL_MAX`` characters), and the
in-flight rest is shown as plain text in a cheap ``Static`` tail under it. Appending to
Markdown re-parses its last block and mounts block widgets, so doing that a few times a
second instead of on every append keeps the UI thread's cost low at high token rates
(benchmarks/ui_stream_2000.py). At the end the tail is committed too: the final answer is
all Markdown (``answer.source == text``). The pane is anchored to the bottom; scrolling up
releases the anchor (auto-scroll stops)
and scrolling back to the end re-engages it (Textual's anchor behaviour).
"""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Markdown, Static

from tui.app.tail import box_height, last_lines

COMMIT_S = 1.0  # at most this long between Markdown appends while streaming
TAIL_MAX = 100_000  # characters of plain tail that force a commit at the next block boundary


class Turn(Vertical):
    """One prompt, its streamed answer, and the one-line metrics summary."""

    DEFAULT_CSS = """
    Turn { height: auto; margin: 0 0 1 0; }
    Turn > .prompt { color: $accent; text-style: bold; }
    Turn > .answer { margin: 0; padding: 0; }
    Turn > .tail { padding: 0; display: none; }
    Turn > .summary { color: $text-muted; }
    Turn > .summary.-error { color: $error; }
    Turn > .summary.-cancelled { color: $warning; }
    """

    def __init__(self, prompt: str, engine: str, request_id: str) -> None:
        super().__init__()
        self.prompt, self.engine, self.request_id = prompt, engine, request_id
        self.text = ""
        self._tail = ""  # streamed text not yet handed to the Markdown widget
        self._committed_at = 0.0
        self._streaming = False
        self._tail_height = 0
        self.finished = False

    def compose(self) -> ComposeResult:
        shown = self.prompt if len(self.prompt) <= 2000 else self.prompt[:2000] + " …"
        yield Static(f"› {shown}", classes="prompt", markup=False)
        yield Markdown("", classes="answer")
        yield Static("", classes="tail", markup=False)
        yield Static(
            f"{self.engine} · waiting for the first token…", classes="summary", markup=False
        )

    @property
    def answer(self) -> Markdown:
        return self.query_one(".answer", Markdown)

    async def append(self, fragment: str) -> None:
        if not fragment:
            return
        if not self._streaming:
            self._streaming = True
            self._committed_at = time.monotonic()
            self.query_one(".summary", Static).update(f"{self.engine} · streaming…")
        self.text += fragment
        self._tail += fragment
        due = time.monotonic() - self._committed_at >= COMMIT_S or len(self._tail) > TAIL_MAX
        width, limit = self._box()
        # A tail longer than the box keeps (at least) what the box shows: only blocks that
        # end above it are committed, so the box keeps its height (no extra layouts).
        above = len(self._tail) - limit * (width + 1)
        cut = self._tail.rfind("\n\n", 0, above) if above > 0 else -1
        if cut < 0:
            cut = self._tail.rfind("\n\n")
        if cut >= 0 and due:
            head, self._tail = self._tail[: cut + 2], self._tail[cut + 2 :]
            await self._commit(head)
        self._show_tail()

    async def _commit(self, text: str) -> None:
        self._committed_at = time.monotonic()
        if text:
            await self.answer.append(text)

    def _show_tail(self) -> None:
        """Show the last lines of the tail in a box whose height changes in steps, so
        most updates repaint only the box (``layout=False``), not the whole screen."""
        tail = self.query_one(".tail", Static)
        text = self._tail.rstrip()
        width, limit = self._box()
        lines = last_lines(text, width, limit) if text else []
        height = box_height(len(lines), limit)
        if height != self._tail_height:
            self._tail_height = height
            tail.styles.height = height
            tail.display = height > 0
        tail.update("\n".join(lines), layout=False)

    def _box(self) -> tuple[int, int]:
        """(width, most lines) of the tail box: the turn's width, the pane's height."""
        pane = self.parent.size if isinstance(self.parent, Widget) else None
        width = self.size.width if self.size.width > 8 else 76
        limit = max(4, pane.height - 2) if pane is not None and pane.height > 6 else 24
        return width, limit

    async def finish(self, summary: str, state: str = "") -> None:
        """Commit the tail and show the summary; ``state``: '', 'cancelled' or 'error'."""
        text, self._tail = self._tail, ""
        await self._commit(text)
        self._show_tail()
        if state == "cancelled":
            await self.answer.append("\n\n*[cancelled — partial answer kept]*")
        self.finished = True
        line = self.query_one(".summary", Static)
        line.update(f"{self.engine} · {summary}")
        if state:
            line.add_class(f"-{state}")


class Conversation(VerticalScroll):
    """The turns of one output pane (slot A or B)."""

    DEFAULT_CSS = """
    Conversation { height: 1fr; padding: 0 1; }
    """

    def on_mount(self) -> None:
        self.anchor()

    async def add_turn(self, prompt: str, engine: str, request_id: str) -> Turn:
        turn = Turn(prompt, engine, request_id)
        await self.mount(turn)
        self.anchor()  # a new prompt is the user's own action: follow it again
        return turn

    @property
    def turns(self) -> list[Turn]:
        return list(self.query(Turn))

    @property
    def following(self) -> bool:
        """True while auto-scroll is on (anchored and not released by the user)."""
        return self.is_anchored and not self._anchor_released

    async def clear(self) -> None:
        await self.remove_children()
