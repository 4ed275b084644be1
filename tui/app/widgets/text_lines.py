"""TextLines: a few lines of plain text, each drawn as one cached strip.

A ``Static`` turns its content into a Visual and wraps and styles all of it again on each
update and on each repaint of any of its lines: measured in the chat screen while an
answer streams (80×24 and 120×40, real model, ~110 tok/s), the hardware panel's text took
~1–1.5 ms a render and the narrow layout's one-line strip ~1.3 ms, several times a second.
Here a line is wrapped once when it changes (:func:`tui.app.tail.wrap_paragraph`, greedy
by words, wide characters counted by cells), drawn as one segment in its style, kept as a
strip, and only the lines that changed are repainted; a layout is asked for only when the
number of lines changes, and never while the widget is hidden.

What is drawn is what is given, minus control characters (dropped, as in the answer's
tail): callers pass text already made terminal-safe (tui/core/safe_text.py), this is the
last guard.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.content import Content
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from tui.app.tail import CONTROL_CHARS, wrap_paragraph
from tui.app.textual_private import styles_key
from tui.app.widgets.sizes import laid_out_size

Line = str | tuple[str, str]  # a line, or (a line, a Rich style such as "dim" or "bold red")


class PlainBoxLines(Widget):
    """A widget whose ``render_line`` draws each full line itself, repainted without
    Textual's styles cache when it has no box around its content.

    Textual passes every repaint through ``StylesCache.render_widget``, which composes
    borders, padding, outline, tint, opacity, text opacity and hatch around the content
    line; with none of them it returns the content line unchanged, after the app's line
    filters. Its set-up (the ancestors' colours, titles, each style rule) cost ~0.1 ms a
    call on an idle machine and ~0.5 ms in the chat screen while an engine decoded, for
    a one-line repaint of the answer's tail ten times a second. Here such a widget's lines
    are its ``render_line`` strips, through the same filters with the same background;
    a widget with any of those styles takes Textual's path (tests/app/test_text_lines.py
    compares the two), and so does every widget while the fast paths are off
    (tui/app/textual_private: the styles' change count is Textual's own)."""

    _filter_background: Color | None = None
    _box_key = -1  # the styles' cache key _box_plain was found for
    _box_plain = False

    def notify_style_update(self) -> None:
        self._filter_background = None
        super().notify_style_update()

    def _plain_box(self) -> bool:
        styles = self.styles
        key = styles_key(styles)  # Textual's count of this widget's style changes
        if key is None:
            return False  # fast paths off (tui/app/textual_private): Textual's own path
        if key != self._box_key:  # the box's own styles, looked up once per change
            self._box_key = key
            self._box_plain = (
                not any(styles.padding)
                and not any(edge for edge, _ in styles.border)
                and not any(edge for edge, _ in styles.outline)
                and not styles.tint.a
                and styles.opacity == 1.0
                and styles.text_opacity == 1.0
                and (not styles.has_rule("hatch") or styles.hatch == "none")
            )
        return self._box_plain and self.opacity == 1.0  # (the ancestors' opacity too)

    def render_lines(self, crop: Region) -> list[Strip]:
        if not self._plain_box():
            return super().render_lines(crop)
        background = self._filter_background
        if background is None:
            background = self._filter_background = self.background_colors[1]
        filters = self.get_line_filters()
        strips = []
        for y in crop.line_range:
            strip = self.render_line(y)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
            strips.append(strip)
        if crop.column_span != (0, laid_out_size(self).width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips


class TextLines(PlainBoxLines):
    """Lines of text, wrapped to the widget's width (``wrap=False``: cropped)."""

    DEFAULT_CSS = "TextLines { height: auto; }"

    def __init__(
        self, text: str = "", *, wrap: bool = True, id: str | None = None, classes: str = ""
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.wrap = wrap
        self._given: list[tuple[str, str]] = []
        self._rows: list[tuple[str, str]] = []  # the given lines, wrapped to _width
        self._width = -1
        self._strips: dict[int, Strip] = {}
        self._base: Style | None = None
        if text:
            self.update(text)

    # -- what is shown --------------------------------------------------------------------
    def update(self, text: str) -> None:
        """Show ``text`` (lines split at newlines), in the widget's own style."""
        self.show_lines(text.split("\n") if text else [])

    def show_text(self, text: Text) -> None:
        """Show a Rich ``Text`` whose lines each carry at most one style (the style of the
        line's first span, over the whole line)."""
        lines: list[Line] = []
        for line in text.split("\n", allow_blank=True):
            span = line.spans[0] if line.spans else None
            lines.append((line.plain, str(span.style) if span is not None else ""))
        self.show_lines(lines)

    def show_lines(self, lines: Sequence[Line]) -> None:
        """Show ``lines``; repaint only the rows that changed (all of them, and a layout,
        when the number of rows changed)."""
        given = [(x, "") if isinstance(x, str) else x for x in lines]
        given = [(CONTROL_CHARS.sub("", t.expandtabs()), s) for t, s in given]
        if given == self._given:
            return
        self._given = given
        old = self._rows
        shown = self._displayed()
        if self._width < 0 or not shown:
            # Not laid out yet, or hidden: wrapped when it is next laid out. A hidden
            # widget asks for no layout: Textual would lay out the whole screen for it
            # (at 80×24 the side panels are hidden and still fed: a layout per update).
            self._width = -1
            self._strips.clear()
            if shown:
                self.refresh(layout=True)
            return
        self._rows = self._wrapped(self._width)
        if len(self._rows) != len(old):
            self._strips.clear()
            self.refresh(layout=True)
            return
        for y, (a, b) in enumerate(zip(old, self._rows, strict=True)):
            if a != b:
                self._strips.pop(y, None)
                self.refresh(Region(0, y, max(1, laid_out_size(self).width), 1))

    def _displayed(self) -> bool:
        """Whether this widget and every container above it are displayed."""
        return all(node.display for node in self.ancestors_with_self)

    @property
    def plain(self) -> str:
        """The text as given (before wrapping)."""
        return "\n".join(t for t, _ in self._given)

    def render(self) -> Content:
        """The plain text (what ``str(widget.render())`` reads; drawing is render_line's),
        as literal ``Content``: a ``str`` would be read as markup wherever Textual asks."""
        return Content(self.plain)

    # -- drawing --------------------------------------------------------------------------
    def _wrapped(self, width: int) -> list[tuple[str, str]]:
        if not self.wrap:
            return list(self._given)
        return [
            (row, style)
            for text, style in self._given
            for _, row in wrap_paragraph(text, max(1, width))
        ]

    def _reflow(self, width: int) -> None:
        if width != self._width:
            self._width = width
            self._rows = self._wrapped(width)
            self._strips.clear()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._reflow(width)
        return len(self._rows)

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((len(t) for t, _ in self._given), default=0)

    def notify_style_update(self) -> None:
        self._base = None  # a theme or class change: every row again
        self._strips.clear()
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = laid_out_size(self).width
        self._reflow(width)
        if self._base is None:
            self._base = self.rich_style
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            text, style = self._rows[y] if y < len(self._rows) else ("", "")
            line_style = self._base + _parsed(style) if style else self._base
            strip = Strip([Segment(text, line_style)]).crop_extend(0, width, self._base)
            self._strips[y] = strip
        return strip


@functools.lru_cache(maxsize=64)
def _parsed(style: str) -> Style:
    return Style.parse(style)
