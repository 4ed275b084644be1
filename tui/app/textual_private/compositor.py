"""A compositor that renders, for a partial update, only what can reach the terminal.

Built on Textual's private ``textual._compositor``: imported only once the fast paths are
on (``tui.app.textual_private``: the tested Textual, every name used here present).

Textual's compositor (8.2.8) answers a partial update — a streamed answer's last line,
a sparkline — by cropping to the *bounding box* of all dirty regions, then asking every
widget whose clip region overlaps that box for *all* of its visible lines, and keeping
only the dirty lines. On the chat screen a two-line update of the answer asks the screen,
four containers, the conversation, the turn, the scroll bar, the prompt, the footer and
the engine bar for ~270 lines; a frame that also redraws the side panels (twice a second)
spans the whole screen because the box joins the left pane to the right one.

:class:`CroppedCompositor` renders a partial update region by region, and in each region
asks a widget only for

- **its lines inside the region's rows** (its whole visible width, so every chop still
  starts at its cut), and only when its visible part overlaps the region at all;
- **nothing, when it is hidden there**: a widget whose part inside the region lies inside
  the part of one widget in front of it is not asked. Compositing never blends two
  widgets' lines (the front widget's strip wins every cut it covers; transparency is
  resolved inside a widget from its ancestors' colours, not by mixing strips), so such a
  widget's lines were rendered only to be thrown away;
- and it finds those widgets among the ones **on the region's rows** (an index of the
  visible widgets by screen row, made anew with Textual's map of them), not by testing
  every widget on the screen for each region: a streamed line's row has ~6 of the chat
  screen's ~30.

A chop (the part of a line between two cuts) is filled from a region's pass only when it
overlaps that region, so the widget that wins it is the front-most one covering it, as in
Textual's own pass. What reaches the terminal is the same update, byte for byte:
``tests/app/test_compositor.py`` renders random dirty regions on real screens both ways
and compares the bytes. A full update (a resize, a new screen) is Textual's own code.

Measured (``benchmarks/watch_cost.py`` "ui", docs/performance.md#watching): the UI
thread's compositing per frame while an answer streams.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType
from typing import cast

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

ROWS_MERGED = 4  # taller updates look at every visible widget (merging rows costs more)
Shown = tuple[Widget, Region, Region]  # a widget, its region, its visible part (clipped)
# A row the update leaves alone: read-only, so a write to it would fail, not spread.
NO_CHOPS = cast(dict[int, Strip | None], MappingProxyType({}))
NO_ENDS: list[int] = []


class CroppedCompositor(Compositor):
    """Textual's compositor, rendering only the lines a partial update shows."""

    _indexed: object = None  # the map of visible widgets indexed below (see _index)
    _front: list[Shown]  # every visible widget, front first
    _rows: list[list[Shown]]  # per screen row, the widgets visible on it, front first
    _rank: dict[Widget, int]  # a widget's place in _front

    def render_partial_update(self) -> ChopsUpdate | None:
        screen = self.size.region
        dirty = self._dirty_regions.copy()
        self._dirty_regions.clear()
        if not dirty:
            return None
        spans = list(self._regions_to_spans(dirty))
        cuts = self.cuts
        # Only the rows of the spans are rendered (ChopsUpdate reads no other row).
        chops: list[dict[int, Strip | None]] = [NO_CHOPS] * len(cuts)
        ends: list[list[int]] = [NO_ENDS] * len(cuts)
        for y in {y for y, _, _ in spans if 0 <= y < len(cuts)}:
            chops[y], ends[y] = dict.fromkeys(cuts[y][:-1]), cuts[y][1:]
        for region in stacked(region.intersection(screen) for region in dirty):
            self._fill(chops, region)
        return ChopsUpdate(chops, spans, ends)

    def _fill(self, chops: list[dict[int, Strip | None]], region: Region) -> None:
        """Fill the empty chops that overlap ``region``, front widget first."""
        cuts = self.cuts
        left, right = region.x, region.right
        for _, rows, strips in self._get_renders(region):
            x = rows.x
            first_cut, last_cut = rows.column_span
            for y, strip in zip(rows.line_range, strips):
                line = chops[y]
                final = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
                for cut, piece in zip(final, strip.divide([c - x for c in final[1:]])):
                    if line.get(cut) is None and cut < right and cut + piece.cell_length > left:
                        line[cut] = piece

    def _get_renders(
        self, crop: Region | None = None
    ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        """(region, rows, strips) of each widget showing inside ``crop``, front first:
        ``rows`` is the widget's visible part within ``crop``'s rows (the strips' area).
        Without a crop, or for the whole screen, Textual's own."""
        if crop is None or crop == self.size.region:
            yield from super()._get_renders(crop)
            return
        top, bottom, left, right = crop.y, crop.bottom, crop.x, crop.right
        in_front: list[Region] = []  # the parts inside ``crop`` of widgets drawn so far
        for widget, region, shown in self._showing(top, bottom):
            if shown.x >= right or shown.right <= left:
                continue  # nothing of it inside the crop
            part = shown.intersection(crop)
            if any(front.contains_region(part) for front in in_front):
                continue  # hidden there by a widget in front of it
            in_front.append(part)
            y0, y1 = max(shown.y, top), min(shown.bottom, bottom)
            rows = Region(shown.x, y0, shown.width, y1 - y0)
            crop_in_widget = Region(shown.x - region.x, y0 - region.y, shown.width, y1 - y0)
            yield region, rows, widget.render_lines(crop_in_widget)

    def _showing(self, top: int, bottom: int) -> list[Shown]:
        """(widget, region, its visible part) of each widget visible on a screen row
        from ``top`` to ``bottom``, front first. A streamed line's update looks only at
        the widgets on its row (not at the panels', the footer's, ...)."""
        self._index()
        if bottom - top == 1:
            return self._rows[top] if 0 <= top < len(self._rows) else []
        if bottom - top > ROWS_MERGED:  # a tall update: one pass over every widget
            return [e for e in self._front if e[2].y < bottom and e[2].bottom > top]
        seen: dict[Widget, Shown] = {}
        for row in self._rows[max(0, top) : bottom]:
            for entry in row:
                seen.setdefault(entry[0], entry)
        rank = self._rank
        return sorted(seen.values(), key=lambda entry: rank[entry[0]])

    def _index(self) -> None:
        """Index the visible widgets by screen row, front first, whenever Textual makes
        its map of them anew (after a layout, a scroll, a resize: a new map object)."""
        visible = self.visible_widgets
        if self._indexed is visible:
            return
        front = [(w, region, region.intersection(clip)) for w, (region, clip) in visible.items()]
        rows: list[list[Shown]] = [[] for _ in range(self.size.height)]
        for entry in front:
            shown = entry[2]
            for row in rows[max(0, shown.y) : shown.bottom]:
                row.append(entry)
        self._front, self._rows, self._indexed = front, rows, visible
        self._rank = {entry[0]: n for n, entry in enumerate(front)}


def stacked(regions: Iterable[Region]) -> list[Region]:
    """``regions`` with each run of same-column regions that touch or overlap vertically
    joined into one (a streamed line and the next are one render, not two); empty ones
    dropped. The union covers exactly the same cells."""
    out: list[Region] = []
    for r in sorted((r for r in regions if r), key=lambda r: (r.x, r.width, r.y)):
        last = out[-1] if out else None
        if last is not None and (last.x, last.width) == (r.x, r.width) and r.y <= last.bottom:
            out[-1] = Region(r.x, last.y, r.width, max(last.bottom, r.bottom) - last.y)
        else:
            out.append(r)
    return out
