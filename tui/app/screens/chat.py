"""ChatScreen: prompt, streaming output pane(s), metrics and hardware panels, engine bar.

The screen draws a conversation that the chat core (tui/chat/core.py) holds and runs:
it asks the core for a turn, runs the turn in a Textual worker, and draws what the core
reports (its events arrive as :class:`~tui.app.messages.CoreEvent` messages) and what it
reads from the core on its frame timer. The side panels are drawn by
:class:`~tui.app.screens.chat_panels.ChatPanels`.

While a turn runs, the screen draws in frames: one timer at ``ui.refresh_hz`` (default
10 Hz) takes the text that arrived since the last frame into each pane; every fifth
frame (2 Hz) it also copies the live numbers and draws the newest hardware sample. Each
frame is one paint: updates made at unrelated moments each cost a paint of their own, and
every paint renders every widget inside the box around all of its changes (Textual crops
a paint to that box), so drawing text at 20 Hz and numbers at 10 Hz apart made ~19 paints
a second, most of them of the whole screen. The rates are what the eye needs: text read
at 4–5 words a second flows smoothly at ten updates, and numbers are read at a glance, as
top and nvtop redraw theirs once or twice a second (a frame with numbers repaints most of
the screen). The measured cost is in benchmarks/watch_cost.py.
"""

from __future__ import annotations

import asyncio
from functools import partial

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from tui.app.answer_energy import AnswerEnergy
from tui.app.format import summary_line
from tui.app.messages import CoreEvent, KvUpdated, ServerSampled, TelemetrySampled
from tui.app.screens.chat_panels import ChatPanels
from tui.app.widgets.ab_table import ABTable
from tui.app.widgets.compact_metrics import CompactMetrics
from tui.app.widgets.conversation import Conversation, Turn
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.hardware_panel import HardwarePanel
from tui.app.widgets.kv_line import KvLine
from tui.app.widgets.metrics_panel import MetricsPanel
from tui.app.widgets.prompt import PromptInput
from tui.app.widgets.server_panel import ServerPanel
from tui.chat.core import ChatCore, Refused
from tui.chat.events import (
    AnswerEnded,
    AnswerWaiting,
    ChatEvent,
    EngineStateChanged,
    Notice,
    TurnEnded,
)
from tui.chat.hardware import HardwareWatch
from tui.chat.host import IDLE, EngineHost
from tui.chat.server_watch import watch_server
from tui.core.pauses import settle_heap
from tui.engines.placement import ABPlan

NARROW_WIDTH = 110
SHORT_HEIGHT = 30
NUMBERS_EVERY = 5  # live numbers and hardware are drawn every this many frames (2 Hz)


class ChatScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel", priority=True),
        Binding("ctrl+n", "next_engine", "Engine", id="next_engine", priority=True),
        Binding("ctrl+o", "toggle_ab", "A/B", id="ab", priority=True),
        Binding("f2", "toggle_panels", "Panels", id="panels", priority=True),
        Binding("ctrl+l", "clear", "Clear", id="clear", priority=True, show=False),
    ]

    class EngineChosen(Message):
        """Slot A now uses ``engine`` (the app remembers it for the next start)."""

        def __init__(self, engine: str) -> None:
            super().__init__()
            self.engine = engine

    def __init__(
        self,
        core: ChatCore,
        hardware: HardwareWatch,
        *,
        telemetry: bool = True,
        load_on_start: bool = True,
        autoplay: list[str] | None = None,
    ) -> None:
        """``telemetry``: the hardware is sampled (and servers' own metrics read)."""
        super().__init__(id="chat")
        self.core, self.hardware, self.telemetry = core, hardware, telemetry
        self.panels = ChatPanels(self, core, hardware)
        self.load_on_start = load_on_start
        self.autoplay_prompts = list(autoplay or [])
        self.turns: dict[tuple[str, str], Turn] = {}
        self._energy = AnswerEnergy()  # answers waiting for their J/token
        self._ends_drawing = 0  # AnswerEnded messages posted, not yet drawn
        self._sample_due = False  # a hardware sample waits for the next frame
        self._frames = 0

    # -- what tests and the app read ---------------------------------------------------
    @property
    def busy(self) -> bool:
        return self.core.busy or self._ends_drawing > 0

    @property
    def ab(self) -> bool:
        return self.core.ab

    @property
    def slot_engine(self) -> dict[str, str | None]:
        return self.core.slot_engine

    def host(self, slot: str) -> EngineHost:
        return self.core.slot_host(slot)

    def ab_plan(self) -> ABPlan:
        return self.core.ab_plan()

    def metrics_panel(self, slot: str) -> MetricsPanel:
        return self.panels.metrics_panel(slot)

    # -- layout ---------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield EngineBar(id="engine-bar")
        yield Static("", id="strip", markup=False)
        yield CompactMetrics(id="compact")
        with Horizontal(id="main"):
            with Vertical(id="chat-col"):
                with Horizontal(id="outputs"):
                    yield Conversation(id="conv-A")
                    yield Conversation(id="conv-B")
                yield ABTable(id="ab-table")
                yield PromptInput(id="prompt")
            with Vertical(id="side"):
                yield Static("", id="ratios", markup=False)
                yield MetricsPanel(id="metrics")
                yield KvLine(id="kv")
                yield MetricsPanel(id="metrics-B")
                yield HardwarePanel(id="hardware")
                yield ServerPanel(id="server")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.panels.show_slot("A")
        self.query_one("#prompt", PromptInput).focus()
        self._layout_for(self.size.width, self.size.height)
        hz = max(1.0, self.core.config.ui.refresh_hz)
        self._frame_timer = self.set_interval(1.0 / hz, self._frame, pause=True)
        # after the first frame: the engine import/load must not delay the first paint
        if self.load_on_start:
            self.call_after_refresh(self._start_load, "A")
        if self.autoplay_prompts:
            self.run_worker(
                self.autoplay(self.autoplay_prompts),
                group="autoplay",
                exclusive=True,
                exit_on_error=False,
                description="replay the recorded prompts",
            )

    def on_resize(self, event) -> None:  # type: ignore[no-untyped-def]
        self._layout_for(event.size.width, event.size.height)

    def _layout_for(self, width: int, height: int) -> None:
        narrow = width < NARROW_WIDTH or height < SHORT_HEIGHT
        self.set_class(narrow, "-narrow")
        if not narrow:
            self.remove_class("-show-panels")
        self.panels.update_strip()

    def action_toggle_panels(self) -> None:
        if not self.has_class("-narrow"):
            self.notify("panels are already shown beside the chat")
            return
        self.toggle_class("-show-panels")
        if not self.has_class("-show-panels"):
            self.focus_prompt()

    def focus_prompt(self) -> None:
        """Give the prompt the keyboard (after F2, a closed screen or palette, an engine
        switch): what one types next goes into it."""
        if not self.has_class("-show-panels"):
            self.query_one("#prompt", PromptInput).focus()

    def on_screen_resume(self) -> None:
        self.focus_prompt()

    # -- engines ----------------------------------------------------------------------
    def _start_load(self, slot: str) -> None:
        self.run_worker(
            self.core.ensure_loaded(slot),
            group=f"load-{slot}",
            exclusive=True,
            exit_on_error=False,
            description=f"load engine for slot {slot}",
        )

    def ensure_loaded(self, slot: str) -> None:
        """Start loading the slot's engine unless it is loaded, loading or failed."""
        if self.core.slot_engine.get(slot) is None or self.core.slot_host(slot).state != IDLE:
            return
        if any(w.group == f"load-{slot}" and not w.is_finished for w in self.workers):
            return  # a load is about to start
        self._start_load(slot)

    def use_engine(self, slot: str, name: str) -> None:
        """Point a slot at a configured engine (engine switch, command palette)."""
        try:
            old = self.core.use_engine(slot, name)
        except Refused as e:
            self.notify(str(e), severity="warning")
            return
        if old == name:
            return  # unchanged
        if slot == "A":
            self.query_one(ServerPanel).show_lines(None)
            self.panels.show_kv(name, None)
            self.post_message(self.EngineChosen(name))
            self.hardware.follow(name)
        self.panels.show_slot(slot)
        if slot == "A" or self.core.ab:
            self._start_load(slot)
        released = self.core.release(old) if old is not None else None
        if released is not None:
            self.run_worker(
                released.close,
                thread=True,
                group=f"close-{old}",
                exit_on_error=False,
                description=f"close engine {old}",
            )

    def action_next_engine(self) -> None:
        try:
            self.use_engine("A", self.core.next_engine())
        except Refused as e:
            self.notify(str(e))
        self.focus_prompt()

    def action_toggle_ab(self) -> None:
        try:
            on_now = self.core.toggle_ab()
        except Refused as e:
            self.notify(str(e))
            return
        self.set_class(on_now, "-ab")
        if on_now:
            self.panels.show_slot("B")
            self._start_load("B")
        self.query_one(EngineBar).set_ab(on_now)
        self.panels.show_slot("A")  # titles say which slot is which
        self.focus_prompt()
        how = f" ({self.core.ab_plan().label})" if on_now else ""
        self.notify(f"A/B mode {'on' if on_now else 'off'}{how}")

    # -- a turn ---------------------------------------------------------------------
    async def action_clear(self) -> None:
        if self.busy:
            self.notify("an answer is still streaming — Esc cancels it first", severity="warning")
            return
        self.core.clear()
        for slot in ("A", "B"):
            await self.query_one(f"#conv-{slot}", Conversation).clear()
        self.turns.clear()

    def action_cancel(self) -> None:
        if self.core.cancel():
            self.notify("cancelling…", timeout=2)

    @on(PromptInput.Submitted)
    async def _submitted(self, msg: PromptInput.Submitted) -> None:
        if await self.submit_text(msg.text):
            msg.prompt_input.clear()

    async def submit_text(self, text: str) -> bool:
        """Start a turn for ``text`` (both slots in A/B mode); False when refused."""
        if self._ends_drawing:
            self.notify("still answering — wait, or press Esc to cancel", severity="warning")
            return False
        try:
            requests = self.core.start_turn(text)
        except Refused as e:
            self.notify(str(e), severity="warning")
            return False
        for slot, req in requests.items():
            conv = self.query_one(f"#conv-{slot}", Conversation)
            name = self.core.engine_of(slot)
            self.turns[(slot, req.request_id)] = await conv.add_turn(text, name, req.request_id)
        names = " vs ".join(self.core.engine_of(s) for s in requests)
        self._frame_timer.resume()
        self.run_worker(
            self.core.run_turn(requests),
            group="turn",
            exclusive=True,
            exit_on_error=False,
            description=f"turn {self.core.turn_no} on {names}",
        )
        return True

    async def autoplay(self, prompts: list[str]) -> None:
        """Submit prompts one after another (``infertop replay``); a worker runs this."""
        for prompt in prompts:
            while self.busy:
                await asyncio.sleep(0.05)
            if await self.core.ensure_loaded("A") is None:
                return
            await self.submit_text(prompt)
            await asyncio.sleep(0.05)
        while self.busy:
            await asyncio.sleep(0.05)
        self.notify(f"replay finished: {len(prompts)} request(s)", timeout=10)

    async def _frame(self) -> None:
        """Timer, while a turn runs: one frame (see the module docstring)."""
        for slot in self.core.slots():
            live = self.core.live[slot]
            if live is None or live.done:
                continue
            turn = self.turns.get((slot, live.request_id))
            text = live.drain()
            if turn is not None and text and not turn.finished:
                await turn.append(text)
        self._frames += 1
        if self._frames % NUMBERS_EVERY != 1 % NUMBERS_EVERY:
            return  # a frame of text alone: Textual paints only the panes' changed lines
        self.panels.refresh_live()
        if self._sample_due:
            self._sample_due = False
            self.panels.show_hardware()

    # -- what the core reports ----------------------------------------------------------
    def post_core_event(self, event: ChatEvent) -> None:
        """The core's listener (on the app's loop): each event becomes a message."""
        if isinstance(event, AnswerEnded):
            self._ends_drawing += 1
        self.post_message(CoreEvent(event))

    @on(CoreEvent)
    async def _core_event(self, msg: CoreEvent) -> None:
        event = msg.event
        if isinstance(event, EngineStateChanged):
            self._engine_state(event)
        elif isinstance(event, AnswerWaiting):
            turn = self.turns.get((event.slot, event.request_id))
            if turn is not None:
                turn.waiting(f"waits for {event.first} to finish: {event.plan.label}")
        elif isinstance(event, AnswerEnded):
            try:
                await self._answer_ended(event)
            finally:
                self._ends_drawing -= 1
        elif isinstance(event, TurnEnded):
            self._turn_ended(event)
        elif isinstance(event, Notice):
            self.notify(event.text, severity=event.severity, timeout=8)  # type: ignore[arg-type]

    def _engine_state(self, msg: EngineStateChanged) -> None:
        if self.core.slot_engine.get(msg.slot) != msg.engine:
            return  # about an engine this slot no longer uses
        self.panels.show_slot(msg.slot)
        self.query_one(EngineBar).set_state(msg.slot, msg.state, msg.detail)
        if msg.state == "error":
            self.notify(f"engine {msg.engine}: {msg.detail}", severity="error", timeout=8)
        if msg.state == "ready":
            self.call_after_refresh(self._settle_heap)  # loading made many objects
        if msg.slot == "A" and msg.state == "ready" and self.telemetry:
            info = self.core.info(msg.engine)
            self.hardware.sampler.pid = info.pid if info else None
            self.run_worker(
                partial(self._server_metrics, msg.engine),
                thread=True,
                group="server-telemetry",
                exclusive=True,
                exit_on_error=False,
                description=f"server metrics of {msg.engine}",
            )

    async def _answer_ended(self, event: AnswerEnded) -> None:
        """An answer ended: its pane, the panels and the history show the end."""
        slot, live, m = event.slot, event.live, event.metrics
        turn = self.turns.get((slot, live.request_id))
        if turn is not None and turn.is_attached:
            await turn.append(live.drain())
            state = "cancelled" if m.finish_reason == "cancelled" else ("error" if m.error else "")
            await turn.finish(summary_line(m), state)
            if not state and self.telemetry and self.hardware.shows(turn.engine):
                self._energy.expect(turn, live.timeline, m.output_tokens)
            if m.error:
                self.notify(f"{turn.engine}: {m.error}", severity="error", timeout=8)
        self.panels.show_history(slot)
        self.metrics_panel(slot).show_live(live.snapshot())
        self.panels.show_context_fill(slot, live.snapshot().context_fill)
        if slot == "A":
            self.panels.show_hardware()

    def _turn_ended(self, event: TurnEnded) -> None:
        self._frame_timer.pause()
        self.call_after_refresh(self._settle_heap)  # after the final answer is painted
        a, b = event.results.get("A"), event.results.get("B")
        if a is not None and b is not None and event.plan is not None:
            self.query_one(ABTable).add_turn(event.turn, a, b, event.plan)
            self.panels.show_ratios({})  # the turn's B/A, whatever frame drew last

    def _settle_heap(self) -> None:
        """Full GC between requests, never during one (see tui/core/pauses.py)."""
        if not self.busy:
            settle_heap()

    # -- telemetry ------------------------------------------------------------------
    @on(KvUpdated)
    def _kv_updated(self, msg: KvUpdated) -> None:
        self.panels.show_kv(msg.engine, msg.state)

    @on(ServerSampled)
    def _server_sampled(self, msg: ServerSampled) -> None:
        if msg.engine == self.core.slot_engine["A"]:
            self.query_one(ServerPanel).show_lines(msg.lines)

    @on(TelemetrySampled)
    def _telemetry(self, msg: TelemetrySampled) -> None:
        self.panels.last_sample = msg.sample
        if self.busy:  # drawn with the next frame, in the same paint as the text
            self._sample_due = True
            return
        self.panels.show_hardware()
        self.panels.update_strip()
        if self._energy.waiting:
            self._energy.settle(self.hardware.sampler.energy)

    def _server_metrics(self, name: str) -> None:
        """Thread worker: the engine's server-side metrics at the telemetry interval."""
        worker = get_current_worker()
        watch_server(
            self.core.config.engines[name],
            self.core.kv_layout(name),
            self.core.config.telemetry.interval_s,
            lambda: worker.is_cancelled,
            lambda lines: self.post_message(ServerSampled(name, lines)),
            lambda state: self.post_message(KvUpdated(name, state)),
        )
