"""TailText: the plain-text tail of a streaming answer (widgets/conversation.py), its lines
already wrapped (tui/app/tail.py), each drawn as one segment."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from tui.app.widgets.sizes import laid_out_size
from tui.app.widgets.text_lines import PlainBoxLines


class TailText(PlainBoxLines):
    """The plain-text tail: lines already wrapped (tui/app/tail.py), drawn as they are.

    A ``Static`` re-wrapped and re-styled its whole text on every update (~6 ms for a
    full pane, ten times a second at 2,000 tok/s); this draws each line as one segment.
    """

    DEFAULT_CSS = "TailText { height: auto; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lines: list[str] = []
        self._style: Style | None = None  # rich_style walks the ancestors: once
        self._strips: dict[str, Strip] = {}  # a line's strip, kept while it scrolls up

    def show(self, lines: list[str]) -> None:
        """Draw ``lines``, repainting only the lines that changed (a stream mostly grows
        its last line): a small repaint keeps the frame's crop, and so the number of
        widgets Textual renders in it, small."""
        old, self.lines = self.lines, lines
        changed = [
            y
            for y in range(max(len(old), len(lines)))
            if y >= len(old) or y >= len(lines) or old[y] != lines[y]
        ]
        if not changed:
            return
        width = laid_out_size(self).width  # (shown while it streams)
        if len(changed) > 2 or not width:
            self.refresh()
        else:
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    def notify_style_update(self) -> None:
        self._style = None  # a theme or class change
        self._strips.clear()
        super().notify_style_update()

    @property
    def plain(self) -> str:
        return "\n".join(self.lines)

    def render_line(self, y: int) -> Strip:
        if self._style is None:
            self._style = self.rich_style
        width, style = laid_out_size(self).width, self._style
        line = self.lines[y] if y < len(self.lines) else ""
        strip = self._strips.get(line)
        if strip is None or strip.cell_length != width:
            if len(self._strips) > 4 * len(self.lines) + 16:
                self._strips.clear()  # kept bounded: the lines shown, and a few scrolled by
            strip = Strip([Segment(line, style)]).crop_extend(0, width, style)
            self._strips[line] = strip
        return strip
