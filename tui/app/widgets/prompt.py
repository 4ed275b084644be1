"""PromptInput: a multi-line prompt with history.

Enter submits; Ctrl+J (or Shift+Enter where the terminal reports it) inserts a newline.
Up on the first line recalls the previous prompt, Down on the last line the next one.
The cursor does not blink (no idle redraws).
"""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea

NEWLINE_KEYS = ("ctrl+j", "shift+enter", "alt+enter")


class PromptInput(TextArea):
    DEFAULT_CSS = """
    PromptInput { height: auto; min-height: 3; max-height: 8; }
    """

    class Submitted(Message):
        def __init__(self, prompt_input: PromptInput, text: str) -> None:
            super().__init__()
            self.prompt_input, self.text = prompt_input, text

    def __init__(self, **kw) -> None:  # type: ignore[no-untyped-def]
        kw.setdefault("soft_wrap", True)
        kw.setdefault("show_line_numbers", False)
        kw.setdefault("tab_behavior", "focus")
        super().__init__(**kw)
        # a blinking cursor redraws twice a second forever: CPU when idle and bytes over SSH
        self.cursor_blink = False
        self.prompt_history: list[str] = []
        self._hist_pos: int | None = None
        self._draft = ""

    def clear_holding_height(self) -> None:
        """Empty the box after a submit, keeping its height until :meth:`release_height`
        (the turn's end). A box of two lines or more shrank as it emptied, so the pane
        above it grew just as the answer's turn mounted: the turn sized its tail box for
        the old pane, then again for the new one, a second layout of the whole screen
        (~15 ms of the UI's time at 120x40) while the engine began to decode. Held, the
        box shrinks at the turn's end, in the layout the finished answer needs anyway."""
        if self.region.height > 0:
            self.styles.min_height = self.region.height
        self.clear()

    def release_height(self) -> None:
        """The height the box's text needs again (its CSS ``min-height``)."""
        if self.styles.inline.has_rule("min_height"):
            self.styles.min_height = None

    async def on_key(self, event: events.Key) -> None:
        """Enter, the newline keys and history keys, handled here; ``prevent_default``
        keeps them from TextArea's own key handler, which every other key reaches next
        (Textual calls each class's handler, this one first)."""
        if event.key == "enter":
            event.prevent_default()
            event.stop()
            self.submit()
            return
        if event.key in NEWLINE_KEYS:
            event.prevent_default()
            event.stop()
            self.insert("\n")
            return
        if event.key == "up" and self.cursor_location[0] == 0 and self.prompt_history:
            event.prevent_default()
            event.stop()
            self.recall(-1)
            return
        if (
            event.key == "down"
            and self._hist_pos is not None
            and (self.cursor_location[0] == self.document.line_count - 1)
        ):
            event.prevent_default()
            event.stop()
            self.recall(+1)

    def submit(self) -> None:
        text = self.text
        if text.strip():
            if not self.prompt_history or self.prompt_history[-1] != text:
                self.prompt_history.append(text)
        self._hist_pos = None
        self.post_message(self.Submitted(self, text))

    def recall(self, step: int) -> None:
        """Move through history: -1 older, +1 newer (past the newest: the draft)."""
        if self._hist_pos is None:
            if step > 0:
                return
            self._draft = self.text
            pos = len(self.prompt_history) - 1
        else:
            pos = self._hist_pos + step
        if pos < 0:
            pos = 0
        if pos >= len(self.prompt_history):
            self._hist_pos = None
            self.load_text(self._draft)
        else:
            self._hist_pos = pos
            self.load_text(self.prompt_history[pos])
        self.move_cursor(self.document.end)
