"""CompactMetrics: the headline sparklines where the side panels do not fit (narrow screens).

One column per slot — A, and B in A/B mode, each under its conversation pane — with three
rows:

- ``TTFT``: one value per finished request (time to first token, ms), the newest last;
  shown: the newest value (the running request's as soon as its first token arrives) and
  the p50 of the values in the sparkline.
- ``ITL``: the gaps between consecutive content chunks of the running request (or of the
  last one, once it ends), ms; shown: the newest gap and the p50 of the gaps in the line.
  So the line moves while the first answer streams.
- ``tok/s``: decode tok/s, one value per finished request; shown: the running request's
  decode rate so far (or the newest value) and the p50 of the line.

Values marked ``~`` are estimates (token counts estimated from text where the engine sent
none). The full panels (F2) carry prefill, the phase bar and the engine's own numbers.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline, Static

from tui.app.format import ms, tps
from tui.core.live import LiveSnapshot
from tui.core.metrics import RequestMetrics
from tui.core.stats import percentile

ROWS = (("ttft", "TTFT"), ("itl", "ITL"), ("decode", "tok/s"))


def _value(key: str, v: float | None) -> str:
    if v is None:
        return "–"
    return tps(v) if key == "decode" else ms(v)


class CompactRow(Horizontal):
    DEFAULT_CSS = """
    CompactRow { height: 1; }
    CompactRow > Label { width: 6; color: $text-muted; }
    CompactRow > Sparkline { width: 1fr; min-width: 4; height: 1; }
    CompactRow > .values { width: 21; padding-left: 1; }
    """

    def __init__(self, slot: str, key: str, label: str) -> None:
        super().__init__(id=f"compact-{slot}-{key}")
        self.key, self.label = key, label

    def compose(self) -> ComposeResult:
        yield Label(self.label)
        yield Sparkline([], summary_function=max)
        yield Static("–", classes="values", markup=False)

    def show(self, values: list[float], current: float | None, estimated: bool = False) -> None:
        self.query_one(Sparkline).data = list(values)
        now = ("~" if estimated else "") + _value(self.key, current)
        text = f"{now:>8}"
        if values:
            text += f" p50 {_value(self.key, percentile(values, 50)):>6}"
        self.query_one(".values", Static).update(text, layout=False)

    @property
    def values_text(self) -> str:
        return str(self.query_one(".values", Static).render())


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
        for key, label in ROWS:
            yield CompactRow(self.slot, key, label)

    def row(self, key: str) -> CompactRow:
        return self.query_one(f"#compact-{self.slot}-{key}", CompactRow)

    def show_history(self, history: dict[str, list[float]], last: RequestMetrics | None) -> None:
        self.history, self.last = history, last
        ttft = history.get("ttft", [])
        self.row("ttft").show(ttft, ttft[-1] if ttft else None)
        dec = history.get("decode", [])
        self.row("decode").show(dec, dec[-1] if dec else None)
        if last is not None and not self.gaps:  # no live gaps seen: the request's own
            gaps = list(last.itl_token_ms or [])
            self.row("itl").show(gaps, gaps[-1] if gaps else None, last.itl_token_estimated)

    def show_live(self, snap: LiveSnapshot) -> None:
        est = snap.tokens_estimated
        if snap.ttft_ms is not None:
            self.row("ttft").show(self.history.get("ttft", []), snap.ttft_ms)
        self.gaps = list(snap.itl_recent)
        self.row("itl").show(self.gaps, snap.last_itl_ms, est)
        if snap.decode_tps is not None:
            self.row("decode").show(self.history.get("decode", []), snap.decode_tps, est)


class CompactMetrics(Horizontal):
    """Column A always; column B shown by the screen's ``-ab`` class (see app.tcss)."""

    DEFAULT_CSS = """
    CompactMetrics { height: 3; background: $panel; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield SlotSparks("A")
        yield SlotSparks("B")

    def slot(self, slot: str) -> SlotSparks:
        return self.query_one(f"#sparks-{slot}", SlotSparks)
