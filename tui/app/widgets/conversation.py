"""Conversation: the turns of one output pane; answers stream into Markdown widgets.

Text is appended through ``Markdown.get_stream()`` (no full re-render per token). The
pane is anchored to the bottom; scrolling up releases the anchor (auto-scroll stops)
and scrolling back to the end re-engages it (Textual's anchor behaviour).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream


class Turn(Vertical):
    """One prompt, its streamed answer, and the one-line metrics summary."""

    DEFAULT_CSS = """
    Turn { height: auto; margin: 0 0 1 0; }
    Turn > .prompt { color: $accent; text-style: bold; }
    Turn > .answer { margin: 0; padding: 0; }
    Turn > .summary { color: $text-muted; }
    Turn > .summary.-error { color: $error; }
    Turn > .summary.-cancelled { color: $warning; }
    """

    def __init__(self, prompt: str, engine: str, request_id: str) -> None:
        super().__init__()
        self.prompt, self.engine, self.request_id = prompt, engine, request_id
        self.text = ""
        self._stream: MarkdownStream | None = None
        self.finished = False

    def compose(self) -> ComposeResult:
        shown = self.prompt if len(self.prompt) <= 2000 else self.prompt[:2000] + " …"
        yield Static(f"› {shown}", classes="prompt", markup=False)
        yield Markdown("", classes="answer")
        yield Static(
            f"{self.engine} · waiting for the first token…", classes="summary", markup=False
        )

    @property
    def answer(self) -> Markdown:
        return self.query_one(".answer", Markdown)

    async def append(self, fragment: str) -> None:
        if not fragment:
            return
        if self._stream is None:
            self._stream = Markdown.get_stream(self.answer)
            self.query_one(".summary", Static).update(f"{self.engine} · streaming…")
        self.text += fragment
        await self._stream.write(fragment)

    async def finish(self, summary: str, state: str = "") -> None:
        """Stop the stream and show the summary; ``state``: '', 'cancelled' or 'error'."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
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
