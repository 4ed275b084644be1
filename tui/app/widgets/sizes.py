"""A widget's content size as its last layout left it, without asking the compositor.

Textual's ``Widget.size`` (the content area) looks the widget's region up in the screen's
map on every call: a walk up the DOM to the screen, then the lookup, then the gutter
taken off. A streamed frame asked for it ~6 times (the tail box's width and the pane's
height, each line drawn, each line repainted), ~10 µs each on a warm machine: about a
quarter of appending a frame's text to the answer. The layout that gives a widget its
region also gives it that region's size (``outer_size``), so the content area is that
less the styles' gutter (padding and border), the same value while the layout stands
(tests/app/test_sizes.py checks every widget of real screens, after a resize and a
scroll too).
"""

from __future__ import annotations

from textual.geometry import Size
from textual.widget import Widget


def laid_out_size(widget: Widget) -> Size:
    """``widget.size`` from the widget's last layout (see the module docstring), for a
    widget that layout placed on the screen (a hidden one keeps its last size here,
    where ``size`` says 0: ask only while it is shown)."""
    width, height = widget.outer_size
    gutter = widget.styles.gutter
    return Size(max(0, width - gutter.width), max(0, height - gutter.height))
