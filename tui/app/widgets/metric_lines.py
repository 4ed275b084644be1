"""MetricLines: rows of label · sparkline · values, drawn by one widget.

The metrics panels used three widgets per row (a Label, a Sparkline, a Static) in a row
container: twenty widgets for five rows. Textual renders every widget that overlaps the
part of the screen a frame changes, so each frame that touched the panel rendered all
twenty (~0.2–1.3 ms each here; the Sparkline re-ran Rich's console on every paint). One
widget holds the rows as strips, rebuilds a row only when its values change, and repaints
only that line. The sparkline's bars and colours are Textual's own, cell for cell
(:func:`spark_segments` computes them as its renderable does, faster), so the panels look
as before.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.renderables.sparkline import Sparkline as SparklineBars
from textual.strip import Strip

from tui.app.widgets.sizes import laid_out_size
from tui.app.widgets.text_lines import PlainBoxLines

BARS = SparklineBars.BARS  # "▁▂▃▄▅▆▇█"


@dataclass
class MetricLine:
    """One row: what it shows (``data`` for the sparkline, ``values`` as text)."""

    key: str
    label: str
    data: list[float] = field(default_factory=list)
    values: str = "–"

    @property
    def values_text(self) -> str:
        return self.values


class MetricLines(PlainBoxLines):
    """Rows of ``label`` (``label_width`` cells) · a sparkline (the rest, at least
    ``min_spark`` cells) · ``values`` (``values_width`` cells, one blank cell first)."""

    COMPONENT_CLASSES = {
        "metric-lines--label",
        "metric-lines--values",
        "metric-lines--spark-min",
        "metric-lines--spark-max",
    }
    DEFAULT_CSS = """
    MetricLines { height: auto; }
    MetricLines > .metric-lines--spark-max { color: $primary; }
    MetricLines > .metric-lines--spark-min { color: $primary 30%; }
    MetricLines.-muted-labels > .metric-lines--label { color: $text-muted; }
    """

    def __init__(
        self,
        rows: Sequence[tuple[str, str]],
        *,
        label_width: int,
        values_width: int,
        min_spark: int = 4,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.lines = [MetricLine(key, label) for key, label in rows]
        self._index = {line.key: i for i, line in enumerate(self.lines)}
        self.label_width, self.values_width, self.min_spark = label_width, values_width, min_spark
        self._strips: dict[int, Strip] = {}
        self._styles: tuple[Style, Style, Style, Style, Style] | None = None

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[no-untyped-def]
        return len(self.lines)

    def row(self, key: str) -> MetricLine:
        return self.lines[self._index[key]]

    def show(self, key: str, data: Sequence[float], values: str) -> None:
        """Set one row; only a row whose data or text changed is redrawn."""
        y = self._index[key]
        line = self.lines[y]
        data = list(data)
        if data == line.data and values == line.values:
            return
        line.data, line.values = data, values
        self._strips.pop(y, None)
        if self.size.width:
            self.refresh(Region(0, y, self.size.width, 1))

    def relabel(self, key: str, label: str) -> None:
        """A row's label changes (the usage screen's busiest clients)."""
        y = self._index[key]
        if self.lines[y].label == label:
            return
        self.lines[y].label = label
        self._strips.pop(y, None)
        if self.size.width:
            self.refresh(Region(0, y, self.size.width, 1))

    def notify_style_update(self) -> None:
        self._styles = None  # a theme or class change: colours again, every row
        self._strips.clear()
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = laid_out_size(self).width
        if y >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            strip = self._strips[y] = self._draw(self.lines[y], width)
        return strip

    def _draw(self, line: MetricLine, width: int) -> Strip:
        base, label, values, low, high = self._colours()
        spark = max(self.min_spark, width - self.label_width - self.values_width)
        segments = [Segment(line.label[: self.label_width].ljust(self.label_width), label)]
        segments += spark_segments(line.data, spark, low, high, base)
        text = " " + line.values
        segments.append(Segment(text[: self.values_width].ljust(self.values_width), values))
        return Strip(segments).crop_extend(0, width, base)

    def _colours(self) -> tuple[Style, Style, Style, Style, Style]:
        """Styles of the widget, its labels and values, and the sparkline's two ends
        (blended over the background, as Textual's Sparkline does)."""
        if self._styles is None:
            base = self.rich_style
            _, background = self.background_colors
            low = background + self.get_component_styles("metric-lines--spark-min").color
            high = background + self.get_component_styles("metric-lines--spark-max").color
            self._styles = (
                base,
                self.get_component_rich_style("metric-lines--label"),
                self.get_component_rich_style("metric-lines--values"),
                Style(color=low.rich_color),
                Style(color=high.rich_color),
            )
        return self._styles


def spark_segments(
    data: list[float], width: int, low: Style, high: Style, base: Style
) -> list[Segment]:
    """A one-line sparkline of ``data`` in ``width`` cells: Textual's own bars and colours,
    cell for cell (``textual.renderables.sparkline.Sparkline`` at height 1, the same
    buckets, bar choice and colour blend; tests/app/test_widgets.py compares the two on
    random data). Computed here because the renderable partitions with ``Fraction``
    arithmetic and builds and adds a new Style per bar: a row of 50 cells over 120 values
    took ~0.85 ms that way and ~0.3 ms this way (hot loop, 2026-12-02), redrawn at every
    numbers frame while an answer streams. Buckets are the same integer floors; each
    bar's style is cached by its colour."""
    if not data:
        return [Segment(BARS[0] * width, _bar_style(base, low.color))]
    if len(data) == 1:
        return [Segment(BARS[-1] * width, _bar_style(base, high.color))]
    n = len(data)
    buckets = [part for b in range(width) if (part := data[n * b // width : n * (b + 1) // width])]
    minimum, maximum = min(data), max(data)
    extent = maximum - minimum or 1
    top = len(BARS) - 1
    lo, hi = low.color, high.color
    out: list[Segment] = []
    index, step = 0.0, len(buckets) / width
    for _ in range(width):
        ratio = (max(buckets[int(index)]) - minimum) / extent
        colour = blend_colors(lo, hi, ratio)  # type: ignore[arg-type]
        out.append(Segment(BARS[int(ratio * top)], _bar_style(base, colour)))  # ratio ≤ 1
        index += step
    return out


def blend_colors(color1: Color, color2: Color, ratio: float) -> Color:
    """The colour ``ratio`` of the way from ``color1`` to ``color2`` in RGB (``color2`` when
    either has no RGB triplet): the blend of Textual's Sparkline renderable, kept here
    because Textual's is private (``textual.renderables._blend_colors``)."""
    if color1.triplet is None or color2.triplet is None:
        return color2
    r1, g1, b1 = color1.triplet
    r2, g2, b2 = color2.triplet
    return Color.from_rgb(r1 + (r2 - r1) * ratio, g1 + (g2 - g1) * ratio, b1 + (b2 - b1) * ratio)


@functools.lru_cache(maxsize=4096)
def _bar_style(base: Style, colour: Color | None) -> Style:
    return base + Style.from_color(colour) if colour is not None else base
