"""AnswerSegment: one Markdown widget of a long answer, and where a new one may start.

A long answer is kept in several Markdown widgets ("segments"): Textual re-arranges every
block of the widget that changed on each layout, while a full segment is never arranged
again (tui/app/widgets/conversation.py decides when a segment is full). A new segment may
start only where Markdown cannot join across it: a blank line outside a code fence, before
a line that does not continue a list, a table, a quote or an indented block.
"""

from __future__ import annotations

import re

from textual.geometry import Size
from textual.widgets import Markdown

from tui.app.textual_private import children_layout_key

_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
_CONTINUES = re.compile(r"[ \t|>]|[-*+] |\d{1,9}[.)] ")  # indented, table, quote, list item


def can_split_before(segment: str, head: str) -> bool:
    """True when Markdown ``segment`` may end and ``head`` start a new document without
    changing how either renders: ``segment`` ends in a blank line outside a code fence,
    and ``head`` does not continue a list, table, quote or indented block."""
    if not segment.endswith("\n\n") or len(_FENCE.findall(segment)) % 2:
        return False
    return bool(head) and not _CONTINUES.match(head) and not head.startswith("\n")


class AnswerSegment(Markdown):
    """A Markdown widget whose content height is cached until its blocks change.

    Textual asks every child of a growing Turn for its height with the Turn's new size as
    the container, which misses its caches and re-arranges every block of every segment on
    each layout. A segment's blocks are all ``height: auto``, so its height depends only on
    the width, its children and their layouts (Textual's counts of both, bumped when a
    child or a style asks for a layout, e.g. a theme switch: ``children_layout_key``).
    """

    _height_key: tuple[int, int, int] | None = None
    _height = 0

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        counts = children_layout_key(self)
        if counts is None:  # fast paths off (tui/app/textual_private): Markdown's own
            return super().get_content_height(container, viewport, width)
        key = (width, *counts)
        if key != self._height_key:
            self._height = super().get_content_height(container, viewport, width)
            self._height_key = key
        return self._height
