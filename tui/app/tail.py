"""The plain-text tail of a streaming answer: its last lines, wrapped to a width.

While an answer streams, the text not yet handed to the Markdown widget is shown as
plain text in a fixed-height box (see widgets/conversation.py). Keeping that box's height
fixed lets each update repaint only the box (no screen layout); these helpers compute
what it shows and how tall it is.
"""

from __future__ import annotations

import re
import textwrap

from rich.cells import cell_len, chop_cells

HEIGHT_STEP = 1  # the box grows in steps of this many lines (more: fewer layouts, but gaps)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # never reaches the terminal raw


def last_lines(text: str, width: int, limit: int) -> list[str]:
    """The last ``limit`` lines of ``text`` word-wrapped to ``width`` terminal cells.

    Blank lines are kept; tabs become spaces and other control characters are dropped
    (the lines are drawn as they are); only the end of ``text`` is wrapped (at most
    ``limit`` lines of ``width`` characters per line each, so the cost does not grow
    with the text). A line of wide characters (CJK, emoji) is cut at ``width`` cells.
    """
    if width < 1 or limit < 1:
        return []
    text = _CONTROL.sub("", text[-(limit + 1) * (width + 1) :])
    out: list[str] = []
    for para in reversed(text.split("\n")):
        lines = textwrap.wrap(para, width, break_on_hyphens=False) or [""]
        if not para.isascii():
            lines = [c for line in lines for c in _fit(line, width)]
        out = lines + out
        if len(out) >= limit:
            break
    return out[-limit:]


def box_height(lines: int, limit: int) -> int:
    """The box's height for ``lines`` lines: rounded up to a HEIGHT_STEP, at most ``limit``."""
    if lines <= 0:
        return 0
    return min(limit, -(-lines // HEIGHT_STEP) * HEIGHT_STEP)


def _fit(line: str, width: int) -> list[str]:
    return chop_cells(line, width) if cell_len(line) > width else [line]
