"""The plain-text tail of a streaming answer: its last lines, wrapped to a width.

While an answer streams, the text not yet handed to the Markdown widget is shown as
plain text in a box a pane high (see widgets/conversation.py). Its height never changes
while the answer streams, so each update repaints only the box (no screen layout); these
helpers compute what it shows.
"""

from __future__ import annotations

import re
from collections import deque

from rich.cells import cell_len, chop_cells

# A full box scrolls in jumps of 1/SCROLL_STEPS of its height (at least 1 line): the
# lines above the last stay put between jumps, so most frames repaint one line.
SCROLL_STEPS = 2


CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # never reaches the terminal raw
_TOKEN = re.compile(r"[^ ]+| +")


def wrap_paragraph(para: str, width: int, first: bool = True) -> list[tuple[int, str]]:
    """Greedy word wrap of ``para`` (one paragraph: no newline, no tab) to ``width``
    cells, as (offset in ``para`` where the line starts, the line). Spaces at a line's end
    are dropped, and at its start unless it is the paragraph's ``first`` line (an
    indent narrower than the line); a word wider than a line is cut by cells (wide
    characters count two; one alone is wider than a line of one cell).

    Greedy wrapping is stable under appends: every line but the last ends where it
    ended before more text came, so wrapping again from the last line's offset gives
    the same lines as wrapping the whole paragraph (:class:`TailLines` relies on it).
    """
    out: list[tuple[int, str]] = []
    line, line_w, start = "", 0, -1  # start < 0: no line open
    space = ""
    for m in _TOKEN.finditer(para):
        tok = m.group()
        if tok[0] == " ":
            if start >= 0:
                space = tok
            elif first and not out and len(tok) < width:
                line, line_w, start = tok, len(tok), m.start()  # the paragraph's indent
            continue
        w = cell_len(tok)
        if start >= 0 and line_w + len(space) + w <= width:
            line, line_w, space = line + space + tok, line_w + len(space) + w, ""
            continue
        if start >= 0:
            out.append((start, line))
        offset, space = m.start(), ""
        while w > width:  # a word wider than a line: cut it
            head = tok[:width] if tok.isascii() else chop_cells(tok, width)[0] or tok[0]
            out.append((offset, head))
            offset, tok = offset + len(head), tok[len(head) :]
            w = cell_len(tok)
        line, line_w, start = tok, w, offset if tok else -1
    if start >= 0:
        out.append((start, line.rstrip()))
    return out or [(0, "")]


def _blank_end_bounded(line: str, width: int, blank: str) -> str:
    """``line`` (an open line: wrapped again with what comes next) with a run of spaces
    at its end cut to ``width + 1``: a run that wide ends the line whatever its length
    (greedy wrapping puts the next word on a new line and drops the run), so the lines
    come out the same, and a stream of blank text costs wrapping linear in its length,
    not a re-wrap of the whole run with every chunk. ``blank``: ``width + 2`` spaces."""
    if line.endswith(blank):
        return line.rstrip(" ") + blank[1:]
    return line


class TailLines:
    """The last lines of a growing text, wrapped to ``width``, kept as the text grows.

    Only the open line (the last) and what arrives after it are wrapped on each
    :meth:`add`, so the cost is linear in what arrived, and lines already shown never
    re-flow while an answer streams (wrapping a window cut from the end of the text, as
    :func:`last_lines` does, moved every line of a long paragraph on every update).
    Control characters are dropped; a tab becomes spaces to the next stop of 8 cells
    from the start of its line.
    """

    def __init__(self, width: int, limit: int) -> None:
        self.width, self.limit = max(1, width), max(1, limit)
        self._done: deque[str] = deque(maxlen=2 * self.limit + 8)
        self._count = 0  # lines completed since the start (the deque keeps the last ones)
        self._open = ""  # text of the open line, from its start (tabs already spaces)
        self._open_first = True  # the open line is its paragraph's first
        self.top = 0  # the first line :meth:`view` shows (counted from the start)
        self._blank = " " * (self.width + 2)

    def reset(self, text: str) -> None:
        """Start over from ``text`` (only its last ``(limit + 1) * (width + 1)``
        characters are wrapped: a bounded cost whatever the text's length)."""
        self._done.clear()
        self._count, self._open, self._open_first = 0, "", True
        self.add(text[-(self.limit + 1) * (self.width + 1) :])
        self.top = max(0, self._count + 1 - self.limit)

    def add(self, text: str) -> None:
        """Append ``text`` to the wrapped lines."""
        width = self.width
        parts = (self._open + CONTROL_CHARS.sub("", text)).split("\n")
        for k, part in enumerate(parts):
            first = self._open_first if k == 0 else True
            wrapped = wrap_paragraph(part.expandtabs(), width, first)
            last = k == len(parts) - 1
            for _, line in wrapped if not last else wrapped[:-1]:
                self._done.append(line)
                self._count += 1
            if last:
                offset = wrapped[-1][0]
                self._open = _blank_end_bounded(part.expandtabs()[offset:], width, self._blank)
                self._open_first = first and len(wrapped) == 1

    def _shown(self) -> list[str]:
        out = list(self._done)
        out.append(self._open if self._open_first else self._open.lstrip())
        while out and not out[-1].strip():
            out.pop()
        return out

    def lines(self) -> list[str]:
        """The last ``limit`` lines, without blank lines at the end."""
        return [line.rstrip() for line in self._shown()[-self.limit :]]

    def view(self, step: int) -> list[str]:
        """At most ``limit`` lines from :attr:`top`, which moves down in steps of
        ``step`` lines when the text outgrows the box (a "jump scroll"): the lines above
        the last stay where they are between jumps, so a frame repaints one line, not
        every line of the box."""
        out = self._shown()
        first = self._count - len(self._done)  # the line out[0] is
        end = first + len(out)
        if end - self.top > self.limit:
            step = max(1, step)
            self.top += -(-(end - self.limit - self.top) // step) * step
        start = max(0, self.top - first)
        return [line.rstrip() for line in out[start : start + self.limit]]


class WrappedLines:
    """Every line of a growing text, wrapped to ``width``, kept as the text grows (an
    open reasoning fold: all of it can be scrolled to).

    As :class:`TailLines`, only the open line (the last) and what arrives after it are
    wrapped on each :meth:`add` (linear in what arrived; lines above never re-flow);
    unlike it, no line is let go. Control characters are dropped, tabs become spaces to
    the next stop of 8 cells from the start of their line, spaces at a line's end are
    not shown.
    """

    def __init__(self, width: int) -> None:
        self.width = max(1, width)
        self._done: list[str] = []
        self._open = ""  # text of the open line, from its start (tabs already spaces)
        self._open_first = True  # the open line is its paragraph's first
        self._blank = " " * (self.width + 2)

    def add(self, text: str) -> int:
        """Append ``text``; returns the first line that changed (the open line's, at
        least: it is wrapped again with the new text)."""
        changed = len(self._done)
        parts = (self._open + CONTROL_CHARS.sub("", text)).split("\n")
        for k, part in enumerate(parts):
            first = self._open_first if k == 0 else True
            para = part.expandtabs()
            wrapped = wrap_paragraph(para, self.width, first)
            last = k == len(parts) - 1
            self._done += [line.rstrip() for _, line in (wrapped[:-1] if last else wrapped)]
            if last:
                offset = wrapped[-1][0]
                self._open = _blank_end_bounded(para[offset:], self.width, self._blank)
                self._open_first = first and len(wrapped) == 1
        return changed

    def __len__(self) -> int:
        """The lines shown: every completed one and the open one."""
        return len(self._done) + 1

    def line(self, y: int) -> str:
        """Line ``y`` as shown ("" past the end)."""
        if y < len(self._done):
            return self._done[y]
        if y == len(self._done):
            return (self._open if self._open_first else self._open.lstrip()).rstrip()
        return ""


def last_lines(text: str, width: int, limit: int) -> list[str]:
    """The last ``limit`` lines of ``text`` word-wrapped to ``width`` terminal cells.

    Blank lines are kept (except at the end); tabs become spaces and other control
    characters are dropped (the lines are drawn as they are); only the end of ``text``
    is wrapped (at most ``limit + 1`` lines of ``width + 1`` characters), so the cost
    does not grow with the text. A word of wide characters (CJK, emoji) is cut by cells.
    """
    if width < 1 or limit < 1:
        return []
    tail = TailLines(width, limit)
    tail.reset(text)
    return tail.lines()


def scroll_step(limit: int) -> int:
    """Lines a full box of ``limit`` lines scrolls by: ``limit / SCROLL_STEPS``, >= 1."""
    return max(1, -(-limit // SCROLL_STEPS))
