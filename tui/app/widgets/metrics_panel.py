"""MetricsPanel: sparklines of TTFT, ITL, decode and prefill tok/s, a phase bar, engine truth.

History rows show the recent requests (one value per request: TTFT, ITL p50, decode
tok/s, prefill tok/s) with the current value and the window's p50 and p90. The "ITL now"
row shows the gaps inside the running request. Prefill measured as prompt/TTFT is an
estimate and is labelled "(est.)".
"""

from __future__ import annotations

from functools import cached_property

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui.app.format import ms, tps
from tui.app.widgets.metric_lines import MetricLine, MetricLines
from tui.core.live import LiveSnapshot
from tui.core.metrics import RequestMetrics
from tui.core.stats import percentile

ROWS: list[tuple[str, str, str]] = [
    # key, label, unit (the unit is in the label; values are bare numbers)
    ("ttft", "TTFT ms", "ms"),
    ("itl", "ITL ms", "ms"),
    ("decode", "dec t/s", "tok/s"),
    ("prefill", "pre t/s", "tok/s"),
    ("live_itl", "ITL now", "ms"),
]
UNITS = {key: unit for key, _, unit in ROWS}


def _fmt(unit: str, v: float | None) -> str:
    if v is None:
        return "–"
    if unit == "ms":
        return f"{v:.1f}" if v < 1000 else f"{v:.0f}"
    return tps(v)


def values_text(unit: str, values: list[float], current: float | None, note: str = "") -> str:
    """A row's values: the current value, then the p50 and p90 of the row's history."""
    if not values:
        return _fmt(unit, current) + note
    p50, p90 = percentile(values, 50), percentile(values, 90)
    return f"{_fmt(unit, current):>6} │ p50 {_fmt(unit, p50):>6} p90 {_fmt(unit, p90):>6}{note}"


class MetricsPanel(Vertical):
    DEFAULT_CSS = """
    MetricsPanel { height: auto; border: round $primary; padding: 0 1; }
    MetricsPanel > .phase, MetricsPanel > .truth { height: auto; }
    """

    def compose(self) -> ComposeResult:
        rows = [(key, label) for key, label, _ in ROWS]
        yield MetricLines(rows, label_width=8, values_width=34, min_spark=8)
        yield Static("phase: no request yet", classes="phase", markup=False)
        yield Static("engine: –", classes="truth", markup=False)

    def on_mount(self) -> None:
        self.border_title = "metrics"

    @cached_property
    def lines(self) -> MetricLines:
        """The rows (composed once: looked up once; a query walks the DOM each time)."""
        return self.query_one(MetricLines)

    def row(self, key: str) -> MetricLine:
        return self.lines.row(key)

    def _show_row(self, key: str, values: list[float], current: float | None, note: str) -> None:
        unit = UNITS[key]
        self.lines.show(key, values, values_text(unit, values, current, note))

    def show_history(self, history: dict[str, list[float]], last: RequestMetrics | None) -> None:
        """``history``: per key (ttft, itl, decode, prefill) one value per recent request."""
        for key in ("ttft", "itl", "decode", "prefill"):
            values = history.get(key, [])
            current = values[-1] if values else None
            note = ""
            if key == "prefill" and last is not None and last.prefill_tps_source == "estimate":
                note = " (est.)"
            if key == "itl" and last is not None and last.itl_token_estimated:
                note = " (est.)"
            self._show_row(key, values, current, note)
        if last is not None:
            self.query_one(".phase", Static).update(phase_bar(last, max(self.size.width - 4, 60)))
            self.query_one(".truth", Static).update(truth_line(last))

    def show_live(self, snap: LiveSnapshot | None) -> None:
        if snap is None:
            return
        note = f" {snap.tokens}tok{'(est.)' if snap.tokens_estimated else ''}"
        self._show_row("live_itl", snap.itl_recent, snap.last_itl_ms, note)


def phase_bar(m: RequestMetrics, width: int) -> Text:
    """Prefill time vs decode time of one request as one bar cut in proportion (yellow:
    prefill — the engine's prompt time, else our TTFT; cyan: decode — first to last
    content chunk), with both times and their shares of the sum."""
    pre = m.prefill_ms if m.prefill_ms is not None else m.ttft_ms
    dec = m.decode_ms
    text = Text("phase ")
    if pre is None or dec is None or pre + dec <= 0:
        text.append("– (needs a first token and two content chunks)", style="dim")
        return text
    src = "" if m.prefill_tps_source == "engine" else " (TTFT)"
    share = 100.0 * pre / (pre + dec)
    label = f" prefill {ms(pre)}{src} {share:.0f}% | decode {ms(dec)} {100.0 - share:.0f}%"
    bar_w = max(4, min(40, width - len(label) - 6))
    n_pre = max(1 if pre > 0 else 0, round(bar_w * pre / (pre + dec)))
    text.append("█" * n_pre, style="yellow")
    text.append("█" * (bar_w - n_pre), style="cyan")
    text.append(label)
    return text


def truth_line(m: RequestMetrics) -> str:
    """Engine-reported numbers beside ours, with the difference."""
    parts: list[str] = []
    if m.engine_prefill_ms is not None:
        diff = m.ttft_minus_engine_prefill_ms
        parts.append(
            f"engine prefill {ms(m.engine_prefill_ms)}"
            + ("" if diff is None else f" (TTFT − it = {diff:+.1f} ms)")
        )
    if m.engine_decode_tps is not None:
        vs = m.decode_tps_vs_engine
        parts.append(
            f"engine decode {tps(m.engine_decode_tps)} tok/s"
            + ("" if vs is None else f" (ours/engine {vs:.3f})")
        )
    return " · ".join(parts) if parts else "engine: reports no timings for this request"
