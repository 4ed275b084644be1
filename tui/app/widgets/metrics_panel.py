"""MetricsPanel: sparklines of TTFT, ITL, decode and prefill tok/s, a phase bar, engine truth.

History rows show the recent requests (one value per request: TTFT, ITL p50, decode
tok/s, prefill tok/s) with the current value and the window's p50 and p90. The "ITL now"
row shows the gaps inside the running request. Prefill measured as prompt/TTFT is an
estimate and is labelled "(est.)".

Where the model thought first (a reasoning model), a line under the rows says when its
answer began (TTFO beside TTFT, tui/core/metrics.py), how long it thought, and its
reasoning and answer tokens and tok/s apart: live while it streams, then the answer's.
Without reasoning the line is not shown (TTFO is TTFT).
"""

from __future__ import annotations

from functools import cached_property

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui.app.format import duration, had_reasoning, ms, tps
from tui.app.widgets.metric_lines import MetricLine, MetricLines
from tui.app.widgets.text_lines import TextLines
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
    MetricsPanel > .reasoning { display: none; }
    """

    def compose(self) -> ComposeResult:
        rows = [(key, label) for key, label, _ in ROWS]
        yield MetricLines(rows, label_width=8, values_width=34, min_spark=8)
        yield TextLines(classes="reasoning")
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
            self._show_reasoning(reasoning_text(last) if had_reasoning(last) else "")

    def show_live(self, snap: LiveSnapshot | None) -> None:
        if snap is None:
            return
        note = f" {snap.tokens}tok{'(est.)' if snap.tokens_estimated else ''}"
        self._show_row("live_itl", snap.itl_recent, snap.last_itl_ms, note)
        if snap.reasoning_tokens and not snap.done:  # done: the answer's own line is up
            self._show_reasoning(live_reasoning_text(snap))

    @cached_property
    def reasoning(self) -> TextLines:
        """The reasoning line (composed once: looked up once)."""
        return self.query_one(".reasoning", TextLines)

    def _show_reasoning(self, text: str) -> None:
        """The reasoning line, shown while it has text."""
        line = self.reasoning
        if line.display != bool(text):
            line.display = bool(text)
        line.update(text)


def reasoning_text(m: RequestMetrics) -> str:
    """An answer's reasoning line: "TTFO 3.4 s (TTFT 180 ms) · thought 3.2 s" then
    "reasoning 120 tok 38.1 t/s · answer 66 tok 90.2 t/s", counts taken from the chunks
    where the engine gave none marked "(est.)"."""
    head = f"TTFO {ms(m.ttfo_ms)} (TTFT {ms(m.ttft_ms)})"
    if m.thinking_ms is not None:
        head += f" · thought {duration(m.thinking_ms)}"
    r_est = " (est.)" if m.reasoning_tokens_source == "chunk-count-estimate" else ""
    a_est = " (est.)" if m.answer_tokens_estimated else ""
    r = "–" if m.reasoning_tokens is None else m.reasoning_tokens
    a = "–" if m.answer_tokens is None else m.answer_tokens
    return (
        f"{head}\nreasoning {r} tok{r_est} {tps(m.reasoning_tps)} t/s · "
        f"answer {a} tok{a_est} {tps(m.answer_tps)} t/s"
    )


def live_reasoning_text(s: LiveSnapshot) -> str:
    """The reasoning line while the answer streams: TTFO once the answer began (else
    "thinking…"), and the reasoning tokens so far."""
    est = " (est.)" if s.tokens_estimated else ""
    head = "thinking…" if s.ttfo_ms is None else f"TTFO {ms(s.ttfo_ms)} (TTFT {ms(s.ttft_ms)})"
    return f"{head}\nreasoning {s.reasoning_tokens} tok{est} so far"


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
