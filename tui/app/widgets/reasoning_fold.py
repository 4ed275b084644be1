"""ReasoningFold: a model's reasoning, folded into one line above its answer.

While a reasoning model thinks, its reasoning streams dimmed in the answer's tail box
(tui/app/widgets/conversation.py); when the answer begins (its first answer text or tool
call), the reasoning folds into this widget: one collapsed line, "▸ thought for 3.2 s ·
120 tokens", that a click, Enter on it, or the chat's key (binding id ``reasoning``)
unfolds. The reasoning's text is drawn only when the fold is open: reasoning that keeps
coming after the answer began (interleaved thinking) costs no layout while folded.

The text is the model's: the turn makes it terminal-safe before it gets here, as it does
the answer's.
"""

from __future__ import annotations

from textual import on
from textual.widgets import Collapsible, Static

from tui.app.format import duration

FOLDED, UNFOLDED = "▸", "▾"


def thought_title(thinking_ms: float | None, tokens: int | None, estimated: bool) -> str:
    """The fold's line: "thought for 3.2 s · 120 tokens", "(est.)" after a count taken
    from the chunks where the engine gave none (tui/core/metrics.py)."""
    title = "thought" if thinking_ms is None else f"thought for {duration(thinking_ms)}"
    if tokens:
        title += f" · {tokens} token{'s' if tokens != 1 else ''}"
        title += " (est.)" if estimated else ""
    return title


class ReasoningFold(Collapsible):
    """One answer's reasoning, collapsed to its title line until unfolded."""

    DEFAULT_CSS = """
    ReasoningFold {
        background: transparent;
        border-top: none;
        padding: 0;
        margin: 0;
    }
    ReasoningFold > CollapsibleTitle { padding: 0; color: $text-muted; text-style: none; }
    ReasoningFold > Contents { padding: 0 0 0 2; }
    ReasoningFold .thought { color: $text-muted; }
    """

    def __init__(self, text: str, title: str) -> None:
        self._body = Static("", classes="thought", markup=False)
        super().__init__(
            self._body,
            title=title,
            collapsed=True,
            collapsed_symbol=FOLDED,
            expanded_symbol=UNFOLDED,
            classes="reasoning",
        )
        self.text = text
        self._drawn: str | None = None

    @property
    def shown_text(self) -> str:
        """What the open fold draws ("" while it was never opened)."""
        return self._drawn or ""

    def set_text(self, text: str) -> None:
        """The reasoning so far; drawn now only when the fold is open."""
        self.text = text
        if not self.collapsed:
            self._draw()

    def _draw(self) -> None:
        if self._drawn != self.text:
            self._drawn = self.text
            self._body.update(self.text)

    @on(Collapsible.Expanded)
    def _expanded(self, event: Collapsible.Expanded) -> None:
        if event.collapsible is self:
            self._draw()
