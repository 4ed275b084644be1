"""ChatView: what the chat screen draws, from the chat core.

The answers in the panes (each turn's widget, an answer's end, its energy once a later
hardware reading closes its window), the engine bar, each slot's metrics panel (history
sparklines, the live "ITL now" row), the narrow screens' compact sparklines and strip,
the B/A ratios, the KV line and the hardware panel. It holds only what it drew (the
turn widgets, to find them again, and what it last showed); the conversation's state is
the core's (tui/chat/core.py).
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

from textual.screen import Screen
from textual.widget import Widget

from tui.app.answer_energy import AnswerEnergy
from tui.app.format import summary_line, why_text
from tui.app.widgets.ab_table import ABTable, ab_ratio_text
from tui.app.widgets.compact_metrics import CompactMetrics
from tui.app.widgets.conversation import Conversation, Turn
from tui.app.widgets.engine_bar import EngineBar, SlotView
from tui.app.widgets.hardware_panel import HardwarePanel
from tui.app.widgets.kv_line import KvLine, kv_short
from tui.app.widgets.metrics_panel import MetricsPanel
from tui.app.widgets.reasoning_fold import ReasoningFold
from tui.app.widgets.strip import strip_text
from tui.app.widgets.text_lines import TextLines
from tui.chat.core import ChatCore
from tui.chat.events import AnswerEnded, AnswerWaiting, TurnEnded
from tui.chat.hardware import HardwareWatch, roofline_text
from tui.core.events import REASONING, ContextFill, Part
from tui.core.kv import KvState
from tui.core.live import LiveRequest, LiveSnapshot
from tui.core.safe_text import markup_label, terminal_label
from tui.engines.placement import SEQUENTIAL
from tui.telemetry.sampler import TelemetrySample

W = TypeVar("W", bound=Widget)


class ChatView:
    def __init__(
        self, screen: Screen[None], core: ChatCore, hardware: HardwareWatch, telemetry: bool
    ) -> None:
        self.screen, self.core, self.hardware, self.telemetry = screen, core, hardware, telemetry
        self.turns: dict[tuple[str, str], Turn] = {}  # (slot, request id) -> its widget
        self._energy = AnswerEnergy()  # answers waiting for their J/token
        self.last_sample: TelemetrySample | None = None
        self.ratios = ""  # B/A, live while both stream (A/B mode)
        self.kv_short = ""  # slot A's KV cache, for the narrow strip
        self.engine_short = ""  # slot A's engine inside in one line, for the strip
        self._kv_fill_shown: dict[str, ContextFill] = {}
        self._widgets: dict[str, Widget] = {}  # see _one
        self.folds = False  # a turn's reasoning is folded in a pane (the key may unfold it)
        # Answers' text is drawn from two tasks: the frame timer's (draw_text) and the
        # screen's, which handles the core's events (answer_ended). A turn's append may
        # wait (the fold's or a new segment's mount), so each drain and its appends hold
        # this lock: else the end's text and summary were drawn while a frame's drained
        # text still waited, and that text came after them (seen under load).
        self._drawing = asyncio.Lock()

    # -- answers -------------------------------------------------------------------------
    async def add_turn(self, slot: str, prompt: str, request_id: str) -> None:
        conv = self.screen.query_one(f"#conv-{slot}", Conversation)
        name = self.core.engine_of(slot)
        self.turns[(slot, request_id)] = await conv.add_turn(prompt, name, request_id)

    async def draw_text(self) -> None:
        """Each streaming pane gets the text that arrived since the last frame."""
        async with self._drawing:
            for slot in self.core.slots():
                live = self.core.live[slot]
                if live is None or live.done:
                    continue
                turn = self.turns.get((slot, live.request_id))
                runs = live.drain_parts()
                if turn is not None and runs and not turn.finished:
                    await self._append(turn, runs, live)

    async def _append(self, turn: Turn, runs: list[tuple[Part, str]], live: LiveRequest) -> None:
        """Runs of text (part, text) into ``turn``. When they end its thinking, the fold's
        line gets the live numbers first (final ones come with the answer's end):
        thinking time = TTFO − TTFT, the first token being the reasoning's."""
        if turn.thinking and any(part != REASONING for part, _ in runs):
            snap = live.snapshot()
            thinking = None
            if snap.ttfo_ms is not None and snap.ttft_ms is not None:
                thinking = snap.ttfo_ms - snap.ttft_ms
            turn.show_thought(thinking, snap.reasoning_tokens, snap.tokens_estimated)
        for part, text in runs:
            await turn.append(text, part)
        self.note_fold(turn)

    def note_fold(self, turn: Turn) -> None:
        """The first folded reasoning shows the key that unfolds it (the footer)."""
        if turn.fold is not None and not self.folds:
            self.folds = True
            self.screen.refresh_bindings()

    def last_folds(self) -> list[ReasoningFold]:
        """The reasoning fold of each shown pane's latest turn that has one."""
        folds = []
        for slot in self.core.slots():
            conv = self.screen.query_one(f"#conv-{slot}", Conversation)
            fold = next((t.fold for t in reversed(conv.turns) if t.fold is not None), None)
            if fold is not None:
                folds.append(fold)
        return folds

    def answer_waiting(self, event: AnswerWaiting) -> None:
        turn = self.turns.get((event.slot, event.request_id))
        if turn is not None:
            turn.waiting(f"waits for {event.first} to finish: {event.plan.label}")

    async def answer_ended(self, event: AnswerEnded) -> None:
        """An answer ended: its pane, the panels and the history show the end."""
        slot, live, m = event.slot, event.live, event.metrics
        turn = self.turns.get((slot, live.request_id))
        state = "cancelled" if m.finish_reason == "cancelled" else ("error" if m.error else "")
        if turn is not None and turn.is_attached:
            async with self._drawing:  # after a frame's text still being drawn
                for part, text in live.drain_parts():
                    await turn.append(text, part)
                if turn.reasoning:
                    estimated = m.reasoning_tokens_source == "chunk-count-estimate"
                    turn.show_thought(m.thinking_ms, m.reasoning_tokens, estimated)
                await turn.finish(summary_line(m) + why_text(event.verdict), state)
            self.note_fold(turn)
            if not state and self.telemetry and self.hardware.shows(turn.engine):
                self._energy.expect(turn, live.timeline, m.output_tokens)
            if m.error:
                self.screen.notify(f"{turn.engine}: {m.error}", severity="error", timeout=8)
        self.show_history(slot)
        self.metrics_panel(slot).show_live(live.snapshot())
        self.show_context_fill(slot, live.snapshot().context_fill)
        if slot == "A":
            self.show_hardware()

    def turn_ended(self, event: TurnEnded) -> None:
        a, b = event.results.get("A"), event.results.get("B")
        if a is not None and b is not None and event.plan is not None:
            self.screen.query_one(ABTable).add_turn(event.turn, a, b, event.plan)
            self.show_ratios({})  # the turn's B/A, whatever frame drew last

    async def clear(self) -> None:
        for slot in ("A", "B"):
            await self.screen.query_one(f"#conv-{slot}", Conversation).clear()
        self.turns.clear()
        if self.folds:
            self.folds = False
            self.screen.refresh_bindings()

    def sampled(self, sample: TelemetrySample, busy: bool) -> None:
        """A hardware reading: drawn now when idle (while busy, by the next frame), and
        answers waiting for their energy get it once a reading closes their window."""
        self.last_sample = sample
        if busy:
            return
        self.show_hardware()
        self.update_strip()
        if self._energy.waiting:
            self._energy.settle(self.hardware.sampler.energy)

    # -- panels ----------------------------------------------------------------------
    def _one(self, selector: str, kind: type[W]) -> W:
        """A widget of the screen's own layout (composed once, never replaced), looked up
        once: a query walks the DOM, and the frames look these up several times each."""
        found = self._widgets.get(selector)
        if found is None:
            found = self._widgets[selector] = self.screen.query_one(selector, kind)
        assert isinstance(found, kind)
        return found

    def _narrow(self) -> bool:
        return self.screen.has_class("-narrow")

    def metrics_panel(self, slot: str) -> MetricsPanel:
        return self._one("#metrics" if slot == "A" else "#metrics-B", MetricsPanel)

    def show_slot(self, slot: str) -> None:
        """The engine bar's slot, and the metrics panels' titles (A/B says whose)."""
        name = self.core.slot_engine[slot]
        if name is None:
            return
        spec = self.core.config.engines[name]
        host = self.core.host(name)
        info = host.info()
        model = info.model if info else (spec.model or spec.url or "")
        view = SlotView(name, spec.kind, short_model(model), host.state, host.error or "")
        self.screen.query_one(EngineBar).set_slot(slot, view)
        for s in ("A", "B"):
            engine = self.core.slot_engine[s]
            title = f"metrics · {s}: {engine}" if self.core.ab and engine else "metrics"
            # a name may hold a server's model name (ollama:11434 › MODEL): no markup
            self.metrics_panel(s).border_title = markup_label(title)

    def show_history(self, slot: str) -> None:
        """The slot's history windows (one value per answer) into its panels."""
        hist = {k: w.snapshot() for k, w in self.core.history[slot].items()}
        last = self.core.last_metrics[slot]
        self.metrics_panel(slot).show_history(hist, last)
        self._one("#compact", CompactMetrics).slot(slot).show_history(hist, last)
        self.update_strip()

    def refresh_live(self) -> None:
        """The running answers' live numbers into the panels that are shown."""
        snaps: dict[str, LiveSnapshot] = {}
        narrow = self._narrow()
        for slot in self.core.slots():
            live = self.core.live[slot]
            if live is not None and not live.done:
                snap = snaps[slot] = live.snapshot()
                turn = self.turns.get((slot, live.request_id))
                if turn is not None and turn.thinking:
                    turn.show_thinking(snap.reasoning_tokens, snap.tokens_estimated)
                if not narrow or self.screen.has_class("-show-panels"):
                    self.metrics_panel(slot).show_live(snap)
                if narrow:
                    self._one("#compact", CompactMetrics).slot(slot).show_live(snap)
                self.show_context_fill(slot, snap.context_fill)
        if self.core.ab:
            self.show_ratios(snaps)
        self.update_strip()

    def show_ratios(self, snaps: dict[str, LiveSnapshot]) -> None:
        """B/A while both stream (live values), else of the last finished turn."""
        how = "seq" if self.core.ab_plan().schedule == SEQUENTIAL else "conc"
        text = ab_ratio_text(snaps.get("A"), snaps.get("B"), self.core.last_metrics, how)
        self._one("#ratios", TextLines).update(text)
        self.ratios = text

    def update_strip(self) -> None:
        if not self._narrow():
            return
        ratios = self.ratios if self.core.ab else ""
        width = self.screen.size.width - 2
        text = strip_text(ratios, self.kv_short, self.last_sample, width, self.engine_short)
        self._one("#strip", TextLines).update(text)

    def show_context_fill(self, slot: str, fill: ContextFill | None) -> None:
        """The engine's own token count (ContextFill) with its model's KV layout."""
        if fill is None or fill is self._kv_fill_shown.get(slot):
            return
        self._kv_fill_shown[slot] = fill
        self.show_kv(self.core.engine_of(slot), self.core.kv_state(slot, fill))

    def show_engine_short(self, text: str) -> None:
        """Slot A's engine inside in one line (tui/core/inside_text.py), terminal-safe."""
        text = terminal_label(text, 200)
        if text != self.engine_short:
            self.engine_short = text
            self.update_strip()

    def show_kv(self, engine: str, state: KvState | None) -> None:
        """Slot A's engine's KV cache (None: it has none to show)."""
        if engine != self.core.slot_engine["A"]:
            return
        self._one("#kv", KvLine).show(state)
        self.kv_short = kv_short(state) if state is not None else ""
        self.update_strip()

    def show_hardware(self) -> None:
        sample = self.last_sample
        if sample is None:
            return
        name = self.core.slot_engine["A"]
        roof = None
        if name is not None:
            spec = self.core.config.engines[name]
            m = self.core.last_metrics["A"]
            roof = roofline_text(self.core.config, spec, self.core.info(name), m, sample)
        history = self.hardware.sampler.cpu.snapshot()
        self._one("#hardware", HardwarePanel).show(sample, history, roof)


def short_model(model: str, width: int = 40) -> str:
    if model.endswith(".gguf") or model.startswith(("/", "~", ".")):
        model = model.replace("\\", "/").rsplit("/", 1)[-1]
    return model if len(model) <= width else model[: width - 1] + "…"
