"""RequestTimelineScreen: one proxied request's timeline, and its text only when asked.

Shows the request's numbers by the same definitions as the chat's (TTFT, TTFR, e2e,
tokens and where the count came from, decode tok/s, TPOT, ITL p50/p90, prefill tok/s —
the engine's where it reported one, else an estimate, said so), where the model thought first
its TTFO, thinking time and reasoning vs answer tokens and tok/s, the engine's own account
beside ours, the prefill/decode phase bar, the gaps between its chunks as a sparkline,
and which of those chunks were reasoning or a tool call. Its prompt and answer are other
people's data: hidden until ``t`` is pressed, fetched from the proxy then, and made
terminal-safe before they are drawn.
"""

from __future__ import annotations

from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static

from tui.app.format import duration, had_reasoning, ms, tps
from tui.app.widgets.metric_lines import MetricLines
from tui.app.widgets.metrics_panel import phase_bar, truth_line, values_text
from tui.core.metrics import RequestMetrics
from tui.core.safe_text import terminal_label, terminal_safe
from tui.core.verdict import verdict_from_dict
from tui.core.verdict_text import breakdown_line
from tui.proxy.columns import detail_text
from tui.proxy.rows import RequestRow, metrics_from_json, row_from_json

HIDDEN = (
    "Text hidden: this is another client's prompt and answer. Press t to show it "
    "(it is fetched from the proxy, which keeps the text of its recent requests only)."
)


class TimelineLoaded(Message):
    def __init__(self, detail: dict[str, Any] | None, error: str | None, text: bool) -> None:
        super().__init__()
        self.detail, self.error, self.text = detail, error, text


PART_NAMES = {"reasoning": "reasoning", "tool": "tool call", "answer": "answer"}
RUNS_SHOWN = 12  # runs of parts named on the chunk line; more are counted


def gaps_ms(chunks: Any) -> list[float]:
    """Gaps between successive chunks with text, in ms, from ``[[t_rel_ns, tokens], ...]``
    (untrusted: entries that are not two numbers are skipped)."""
    stamps = [
        c[0]
        for c in chunks
        if isinstance(c, list) and c and isinstance(c[0], int) and not isinstance(c[0], bool)
    ]
    return [(b - a) / 1e6 for a, b in zip(stamps, stamps[1:])]


def parts_text(chunks: Any) -> str:
    """Which chunks were reasoning or a tool call, from ``[[t_rel_ns, tokens, part], ...]``
    (a third item only where the chunk is not answer text): "chunks: 1–120 reasoning ·
    121–186 answer · 187–190 tool call"; "" when every chunk is answer text. Untrusted:
    an entry that is not a list counts as answer text, an unknown part is named "other",
    and past :data:`RUNS_SHOWN` runs the rest are counted, not named (linear in the list)."""
    if not isinstance(chunks, list):
        return ""
    runs: list[list[Any]] = []  # [part, first, last] (1-based chunk numbers)
    for i, c in enumerate(chunks, 1):
        part = c[2] if isinstance(c, list) and len(c) > 2 else "answer"
        name = PART_NAMES.get(part, "other") if isinstance(part, str) else "other"
        if runs and runs[-1][0] == name:
            runs[-1][2] = i
        else:
            runs.append([name, i, i])
    if all(name == "answer" for name, _, _ in runs):
        return ""
    shown = [f"{a}–{b} {name}" if b > a else f"{a} {name}" for name, a, b in runs[:RUNS_SHOWN]]
    more = f" · {len(runs) - RUNS_SHOWN} more runs" if len(runs) > RUNS_SHOWN else ""
    return "chunks: " + " · ".join(shown) + more


def reasoning_numbers(m: RequestMetrics) -> str:
    """TTFO, thinking time, and reasoning vs answer tokens and tok/s, with where the
    reasoning count came from (tui/core/metrics.py)."""
    thought = "" if m.thinking_ms is None else f" · thought {duration(m.thinking_ms)}"
    r = "–" if m.reasoning_tokens is None else m.reasoning_tokens
    a = "–" if m.answer_tokens is None else m.answer_tokens
    source = f" ({m.reasoning_tokens_source})" if m.reasoning_tokens_source else ""
    a_est = " (estimate)" if m.answer_tokens_estimated else ""
    return (
        f"TTFO {ms(m.ttfo_ms)}{thought} · reasoning {r} tok{source} "
        f"{tps(m.reasoning_tps)} tok/s · answer {a} tok{a_est} {tps(m.answer_tps)} tok/s"
    )


def numbers_text(m: RequestMetrics, d: dict[str, Any]) -> str:
    """The request's numbers, a few lines (see the module docstring)."""
    mm = d.get("metrics") or {}
    p50, p90 = mm.get("itl_ms_p50"), mm.get("itl_ms_p90")
    p50 = p50 if isinstance(p50, int | float) else None
    p90 = p90 if isinstance(p90, int | float) else None
    fwd = d.get("forward_delay_ms")
    lines = [
        f"TTFT {ms(m.ttft_ms)} · TTFR {ms(m.ttfr_ms)} · e2e {ms(m.e2e_ms)}"
        + (f" · the proxy forwarded it after {fwd:.2f} ms" if isinstance(fwd, int | float) else ""),
        f"tokens: {m.prompt_tokens if m.prompt_tokens is not None else '–'} prompt · "
        f"{m.output_tokens if m.output_tokens is not None else '–'} out "
        f"({m.output_tokens_source}) · {m.content_chunks} chunks with text",
        f"decode {tps(m.decode_tps)} tok/s · TPOT {ms(m.tpot_ms)} · "
        f"ITL p50 {ms(p50)} p90 {ms(p90)}"
        + (" (per-token view estimated)" if m.itl_token_estimated else ""),
        f"prefill {tps(m.prefill_tps)} tok/s"
        + (f" ({m.prefill_tps_source})" if m.prefill_tps_source else ""),
        truth_line(m),
    ]
    if had_reasoning(m):
        lines.insert(1, reasoning_numbers(m))
    lines += why_lines(d)
    for key, label in (
        ("truth_note", "engine report"),
        ("note", "note"),
        ("stamp_source", "stamps"),
    ):
        v = d.get(key)
        if isinstance(v, str) and v:
            lines.append(f"{label}: {v}")
    if m.error:
        lines.append(f"error: {m.error}")
    return terminal_safe("\n".join(terminal_label(x, 400) for x in lines))


def why_lines(d: dict[str, Any]) -> list[str]:
    """The request's verdict and breakdown (tui/core/verdict.py), and its agent session
    (tui/proxy/sessions.py) — from the proxy, read as untrusted."""
    out: list[str] = []
    v = verdict_from_dict(d.get("verdict"))
    if v is not None:
        out += [f"why: {v.text}", breakdown_line(v.breakdown)]
    s = d.get("session")
    if isinstance(s, dict) and isinstance(s.get("id"), str):
        turn, turns = s.get("turn"), s.get("turns")
        out.append(f"session {s['id']}: turn {turn} of {turns}")
        per = s.get("per_turn")
        for t in per[-8:] if isinstance(per, list) else []:
            if isinstance(t, dict):
                out.append(turn_text(t))
    return out


def turn_text(t: dict[str, Any]) -> str:
    """One turn of a session: messages, context and its growth, cached vs computed
    prompt tokens, prefill, decode and the client's time before it."""

    def n(key: str) -> str:
        v = t.get(key)
        return "–" if not isinstance(v, int | float) or isinstance(v, bool) else f"{v:,.0f}"

    def s(key: str) -> str:
        v = t.get(key)
        if not isinstance(v, int | float) or isinstance(v, bool):
            return "–"
        return duration(v) if v >= 1000 else ms(v)

    return (
        f"  {n('messages')} msgs · {n('prompt_tokens')} tok (+{n('growth')}) · "
        f"cached {n('cached_tokens')} / computed {n('computed_tokens')} · prefill "
        f"{s('prefill_ms')} · decode {s('decode_ms')} · client before it {s('client_ms')}"
    )


class RequestTimelineScreen(Screen[None]):
    CSS_PATH = "request_timeline.tcss"

    BINDINGS = [
        Binding("escape", "back", "Back", id="timeline_back"),
        Binding("t", "show_text", "Show text", id="timeline_text"),
        Binding("r", "reload", "Reload", id="timeline_reload"),
    ]

    def __init__(self, feed: Any, row: RequestRow) -> None:
        super().__init__()
        self.feed = feed
        self.row = row
        self.detail: dict[str, Any] | None = None
        self.metrics: RequestMetrics | None = None
        self.text_shown = False

    def compose(self) -> ComposeResult:
        yield Static(detail_text(self.row), id="rt-head", markup=False)
        yield Static(
            "reading the request's timeline from the proxy…", id="rt-numbers", markup=False
        )
        yield Static("", id="rt-phase")
        yield MetricLines([("gaps", "gap ms")], label_width=8, values_width=34, min_spark=8)
        yield Static("", id="rt-parts", markup=False)
        with VerticalScroll(id="rt-text-box"):
            yield Static(HIDDEN, id="rt-text", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.load(False)

    @work(thread=True, exclusive=True, group="timeline", exit_on_error=False)
    def load(self, text: bool) -> None:
        try:
            d = self.feed.detail(self.row.id, text)
            self.post_message(TimelineLoaded(d, None, text))
        except Exception as e:  # noqa: BLE001 - WatchError, or a bug: said on screen
            self.post_message(TimelineLoaded(None, str(e), text))

    @on(TimelineLoaded)
    def _loaded(self, msg: TimelineLoaded) -> None:
        numbers = self.query_one("#rt-numbers", Static)
        if msg.detail is None:
            numbers.update(terminal_label(f"could not read it: {msg.error}", 400))
            return
        d = msg.detail
        self.detail = d
        try:
            self.row = row_from_json(d.get("row"))
            m = d.get("metrics")
            self.metrics = metrics_from_json(m) if m is not None else None
        except ValueError as e:
            numbers.update(terminal_label(f"the proxy sent a bad answer: {e}", 400))
            return
        self.query_one("#rt-head", Static).update(detail_text(self.row))
        if self.metrics is None:
            numbers.update("still in flight: its numbers come when it ends (r reloads)")
        else:
            numbers.update(numbers_text(self.metrics, d))
            width = max(20, self.size.width - 2)
            self.query_one("#rt-phase", Static).update(phase_bar(self.metrics, width))
        chunks = d.get("chunks") if isinstance(d.get("chunks"), list) else []
        gaps = gaps_ms(chunks)
        self.query_one(MetricLines).show(
            "gaps", gaps, values_text("ms", gaps, gaps[-1] if gaps else None)
        )
        text = terminal_label(parts_text(chunks), 400)
        parts = self.query_one("#rt-parts", Static)
        parts.update(text)
        parts.display = bool(text)
        if msg.text:
            self._show_text(d.get("text"))

    def _show_text(self, t: Any) -> None:
        box = self.query_one("#rt-text", Static)
        if not isinstance(t, dict) or not t.get("kept"):
            box.update("The proxy no longer keeps this request's text (only its recent ones).")
            return
        req, resp = t.get("request"), t.get("response")
        cut = " (cut: the body was longer than the proxy keeps)" if t.get("request_cut") else ""
        text = (
            f"── prompt{cut} ──\n{req if isinstance(req, str) else ''}\n\n"
            f"── answer ──\n{resp if isinstance(resp, str) else ''}"
        )
        box.update(terminal_safe(text))
        self.text_shown = True

    def action_show_text(self) -> None:
        self.query_one("#rt-text", Static).update("fetching the text from the proxy…")
        self.load(True)

    def action_reload(self) -> None:
        self.load(self.text_shown)

    def action_back(self) -> None:
        self.dismiss()
