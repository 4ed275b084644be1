"""ReasoningFold: a model's reasoning, folded into one line above its answer.

While a reasoning model thinks, its reasoning streams dimmed in the answer's tail box
(tui/app/widgets/conversation.py); when the answer begins (its first answer text or tool
call), the reasoning folds into this widget: one collapsed line, "▸ thought for 3.2 s ·
120 tokens", that a click, Enter on it, or the chat's key (binding id ``reasoning``)
unfolds. The reasoning's text is drawn only when the fold is open: reasoning that keeps
coming after the answer began (interleaved thinking) costs no layout while folded.

Open, the fold's body (:class:`FoldText`) keeps every line wrapped and draws a line at a
time: text that comes while it is open is wrapped alone (with the line it continues),
only the lines it changed are repainted, and a layout is asked for only when the number
of lines grows. So a frame costs the same whatever the fold holds (a ``Static`` given the
whole reasoning wrapped and rendered all of it on every frame:
tests/app/test_fold_cost.py counts it).

The text is the model's: the turn makes it terminal-safe before it gets here, as it does
the answer's.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual import on
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import Collapsible

from tui.app.format import duration
from tui.app.tail import WrappedLines
from tui.app.widgets.sizes import laid_out_size
from tui.app.widgets.text_lines import PlainBoxLines

FOLDED, UNFOLDED = "▸", "▾"


def thought_title(thinking_ms: float | None, tokens: int | None, estimated: bool) -> str:
    """The fold's line: "thought for 3.2 s · 120 tokens", "(est.)" after a count taken
    from the chunks where the engine gave none (tui/core/metrics.py)."""
    title = "thought" if thinking_ms is None else f"thought for {duration(thinking_ms)}"
    if tokens:
        title += f" · {tokens} token{'s' if tokens != 1 else ''}"
        title += " (est.)" if estimated else ""
    return title


class FoldText(PlainBoxLines):
    """The open fold's text: all its lines, wrapped once to the widget's width
    (:class:`~tui.app.tail.WrappedLines`), each drawn as one strip and kept; appended
    text repaints the lines it changed (a layout only when there are more lines)."""

    DEFAULT_CSS = "FoldText { height: auto; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._parts: list[str] = []  # the text as given
        self._lines: WrappedLines | None = None  # wrapped at the last laid-out width
        self._strips: dict[int, Strip] = {}
        self._style: Style | None = None

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def add(self, text: str) -> None:
        """Show ``text`` after what is shown."""
        if not text:
            return
        self._parts.append(text)
        lines = self._lines
        if lines is None:  # not laid out yet: wrapped when it is
            self.refresh(layout=True)
            return
        before = len(lines)
        first = lines.add(text)
        for y in range(first, before):
            self._strips.pop(y, None)
        if len(lines) != before:
            self.refresh(layout=True)  # repaints the lines below ``first`` too (cached)
        else:
            self.refresh(Region(0, first, max(1, lines.width), before - first))

    def _wrapped(self, width: int) -> WrappedLines:
        """The text wrapped to ``width`` (all of it again only when the width changed)."""
        lines = self._lines
        if lines is None or lines.width != max(1, width):
            lines = self._lines = WrappedLines(width)
            lines.add(self.text)
            self._strips.clear()
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._wrapped(width)) if width > 0 else 0  # (0: not placed yet)

    def notify_style_update(self) -> None:
        self._style = None  # a theme or class change: every line again
        self._strips.clear()
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = laid_out_size(self).width
        if width <= 0:
            return Strip.blank(0)
        lines = self._wrapped(width)
        if self._style is None:
            self._style = self.rich_style
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            strip = Strip([Segment(lines.line(y), self._style)])
            strip = strip.crop_extend(0, width, self._style)
            self._strips[y] = strip
        return strip


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
        self._body = FoldText(classes="thought")
        super().__init__(
            self._body,
            title=title,
            collapsed=True,
            collapsed_symbol=FOLDED,
            expanded_symbol=UNFOLDED,
            classes="reasoning",
        )
        self._parts = [text] if text else []
        self._drawn = 0  # how many of the parts the body shows

    @property
    def text(self) -> str:
        """The reasoning so far."""
        return "".join(self._parts)

    @property
    def shown_text(self) -> str:
        """What the open fold draws ("" while it was never opened)."""
        return self._body.text

    def add(self, text: str) -> None:
        """More reasoning; drawn now only when the fold is open."""
        if text:
            self._parts.append(text)
            if not self.collapsed:
                self._draw()

    def _draw(self) -> None:
        """The body gets what came since it last drew (all of it at the first unfold)."""
        if self._drawn < len(self._parts):
            self._body.add("".join(self._parts[self._drawn :]))
            self._drawn = len(self._parts)

    @on(Collapsible.Expanded)
    def _expanded(self, event: Collapsible.Expanded) -> None:
        if event.collapsible is self:
            self._draw()
