"""CompactMetrics: the headline sparklines where the side panels do not fit (narrow screens).

One column per slot — A, and B in A/B mode, each under its conversation pane — with three
rows:

- ``TTFT``: one value per finished request (time to first token, ms), the newest last;
  shown: the newest value (the running request's as soon as its first token arrives) and
  the p50 of the values in the sparkline; where that request's model thought first, its
  TTFO (first answer token or tool call; "–" while it thinks) in place of the p50.
- ``ITL``: the gaps between consecutive content chunks of the running request (or of the
  last one, once it ends), ms; shown: the newest gap and the p50 of the gaps in the line.
  So the line moves while the first answer streams.
- ``tok/s``: decode tok/s, one value per finished request; shown: the running request's
  decode rate so far (or the newest value) and the p50 of the line.

Values marked ``~`` are estimates (token counts estimated from text where the engine sent
none). The full panels (F2) carry prefill, the phase bar and the engine's own numbers.
"""

from __future__ import annotations

from functools import cached_property

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from tui.app.format import had_reasoning, ms, tps
from tui.app.widgets.metric_lines import MetricLine, MetricLines
from tui.core.live import ITL_WINDOW, LiveSnapshot
from tui.core.metrics import RequestMetrics
from tui.core.stats import percentile

ROWS = (("ttft", "TTFT"), ("itl", "ITL"), ("decode", "tok/s"))


def _value(key: str, v: float | None) -> str:
    if v is None:
        return "–"
    return tps(v) if key == "decode" else ms(v)


def row_values(key: str, values: list[float], current: float | None, estimated: bool) -> str:
    """A row's values: the newest (``~`` when estimated), then the p50 of the line."""
    now = ("~" if estimated else "") + _value(key, current)
    text = f"{now:>8}"
    if values:
        text += f" p50 {_value(key, percentile(values, 50)):>6}"
    return text


def ttft_ttfo_values(ttft: float | None, ttfo: float | None) -> str:
    """The TTFT row of an answer whose model thought first: TTFT, then TTFO."""
    return f"{ms(ttft):>7} TTFO {ms(ttfo)}"


class SlotSparks(Vertical):
    DEFAULT_CSS = """
    SlotSparks { width: 1fr; height: 3; }
    SlotSparks.-b { border-left: vkey $primary 50%; }
    """

    def __init__(self, slot: str) -> None:
        super().__init__(id=f"sparks-{slot}", classes="-b" if slot == "B" else "")
        self.slot = slot
        self.history: dict[str, list[float]] = {}
        self.last: RequestMetrics | None = None
        self.gaps: list[float] = []

    def compose(self) -> ComposeResult:
        yield MetricLines(
            ROWS, label_width=6, values_width=21, min_spark=4, classes="-muted-labels"
        )

    @cached_property
    def lines(self) -> MetricLines:
        """The rows (composed once: looked up once; a query walks the DOM each time)."""
        return self.query_one(MetricLines)

    def row(self, key: str) -> MetricLine:
        return self.lines.row(key)

    def _show(
        self, key: str, values: list[float], current: float | None, estimated: bool = False
    ) -> None:
        text = row_values(key, values, current, estimated)
        self.lines.show(key, values, text)

    def show_history(self, history: dict[str, list[float]], last: RequestMetrics | None) -> None:
        self.history, self.last = history, last
        ttft = history.get("ttft", [])
        if last is not None and had_reasoning(last) and last.ttfo_ms != last.ttft_ms:
            self.lines.show("ttft", ttft, ttft_ttfo_values(last.ttft_ms, last.ttfo_ms))
        else:
            self._show("ttft", ttft, ttft[-1] if ttft else None)
        dec = history.get("decode", [])
        self._show("decode", dec, dec[-1] if dec else None)
        if last is not None and not self.gaps:  # no live gaps seen: the request's own
            gaps = last.itl_token_recent(ITL_WINDOW)
            self._show("itl", gaps, gaps[-1] if gaps else None, last.itl_token_estimated)

    def show_live(self, snap: LiveSnapshot) -> None:
        est = snap.tokens_estimated
        ttft = self.history.get("ttft", [])
        if snap.reasoning_tokens and snap.ttfo_ms != snap.ttft_ms:
            self.lines.show("ttft", ttft, ttft_ttfo_values(snap.ttft_ms, snap.ttfo_ms))
        elif snap.ttft_ms is not None:
            self._show("ttft", ttft, snap.ttft_ms)
        self.gaps = list(snap.itl_recent)
        self._show("itl", self.gaps, snap.last_itl_ms, est)
        if snap.decode_tps is not None:
            self._show("decode", self.history.get("decode", []), snap.decode_tps, est)


class CompactMetrics(Horizontal):
    """Column A always; column B shown by the screen's ``-ab`` class (see app.tcss)."""

    DEFAULT_CSS = """
    CompactMetrics { height: 3; background: $panel; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield SlotSparks("A")
        yield SlotSparks("B")

    def slot(self, slot: str) -> SlotSparks:
        return self._slots[slot]

    @cached_property
    def _slots(self) -> dict[str, SlotSparks]:  # composed once: looked up once
        return {s.slot: s for s in self.query(SlotSparks)}
