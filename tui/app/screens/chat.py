"""ChatScreen: prompt, streaming output pane(s), metrics and hardware panels, engine bar.

The screen lays out and routes: it asks the chat core (tui/chat/core.py) for a turn, runs
it in a Textual worker, and passes what the core reports (CoreEvent messages) and reads
(on its frame timer) to the ChatView, which draws (tui/app/screens/chat_view.py).

While a turn runs the screen draws in frames: text at ``ui.refresh_hz`` (10 Hz), live
numbers and hardware every fifth frame (2 Hz), each frame one paint — docs/tui.md says
why those rates, benchmarks/watch_cost.py what they cost.
"""

from __future__ import annotations

import asyncio

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer

from tui.app.messages import CoreEvent, KvUpdated, ServerSampled, TelemetrySampled
from tui.app.screens.chat_engines import ChatEngines
from tui.app.screens.chat_view import ChatView
from tui.app.textual_private import use_cropped_compositor
from tui.app.widgets.ab_table import ABTable
from tui.app.widgets.compact_metrics import CompactMetrics
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.hardware_panel import HardwarePanel
from tui.app.widgets.kv_line import KvLine
from tui.app.widgets.metrics_panel import MetricsPanel
from tui.app.widgets.prompt import PromptInput
from tui.app.widgets.server_panel import ServerPanel
from tui.app.widgets.text_lines import TextLines
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
from tui.chat.host import EngineHost
from tui.core.pauses import settle_heap
from tui.engines.base import GenerationRequest
from tui.engines.placement import ABPlan, shares_cores_with_ui

NARROW_WIDTH = 110
SHORT_HEIGHT = 30
NUMBERS_EVERY = 5  # live numbers and hardware are drawn every this many frames (2 Hz)
START_AT_LATEST_S = 0.25  # a turn's engine work starts after its first paint, or by then


class ChatScreen(ChatEngines):
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel", priority=True),
        Binding("ctrl+n", "next_engine", "Engine", id="next_engine", priority=True),
        Binding("ctrl+o", "toggle_ab", "A/B", id="ab", priority=True),
        Binding("f2", "toggle_panels", "Panels", id="panels", priority=True),
        Binding("ctrl+l", "clear", "Clear", id="clear", priority=True, show=False),
        Binding("ctrl+r", "toggle_reasoning", "Thoughts", id="reasoning", priority=True),
    ]

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
        use_cropped_compositor(self)  # a streamed line repaints one widget (fast paths on)
        self.core, self.hardware, self.telemetry = core, hardware, telemetry
        self.view = ChatView(self, core, hardware, telemetry)
        self.load_on_start = load_on_start
        self.autoplay_prompts = list(autoplay or [])
        self._ends_drawing = 0  # AnswerEnded messages posted, not yet drawn
        self._checking = False  # a prompt's servers' listeners are being read
        self._sample_due = False  # a hardware sample waits for the next frame
        self._frames = 0
        self._loading = {}  # slots whose engine loads (ChatEngines._follow_loading)

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

    # -- layout ---------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield EngineBar(id="engine-bar")
        yield TextLines(id="strip", wrap=False)
        yield CompactMetrics(id="compact")
        with Horizontal(id="main"):
            with Vertical(id="chat-col"):
                with Horizontal(id="outputs"):
                    yield Conversation(id="conv-A")
                    yield Conversation(id="conv-B")
                yield ABTable(id="ab-table")
                yield PromptInput(id="prompt")
            with Vertical(id="side"):
                yield TextLines(id="ratios", wrap=False)
                yield MetricsPanel(id="metrics")
                yield KvLine(id="kv")
                yield MetricsPanel(id="metrics-B")
                yield HardwarePanel(id="hardware")
                yield ServerPanel(id="server")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.view.show_slot("A")
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
        self.view.update_strip()

    def action_toggle_panels(self) -> None:
        if not self.has_class("-narrow"):
            self.notify("panels are already shown beside the chat")
            return
        self.toggle_class("-show-panels")
        if not self.has_class("-show-panels"):
            self.focus_prompt()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The reasoning key is offered (in the footer too) once a reasoning is folded."""
        if action == "toggle_reasoning":
            return self.view.folds
        return True

    def action_toggle_reasoning(self) -> None:
        """Unfold the latest reasoning of each shown pane (fold them when all are open)."""
        folds = self.view.last_folds()
        collapsed = not any(fold.collapsed for fold in folds)
        for fold in folds:
            fold.collapsed = collapsed

    def focus_prompt(self) -> None:
        """Give the prompt the keyboard (after F2, a closed screen or palette, an engine
        switch): what one types next goes into it."""
        if not self.has_class("-show-panels"):
            self.query_one("#prompt", PromptInput).focus()

    def on_screen_resume(self) -> None:
        self.focus_prompt()

    # -- a turn ---------------------------------------------------------------------
    async def action_clear(self) -> None:
        if self.busy:
            self.notify("an answer is still streaming — Esc cancels it first", severity="warning")
            return
        self.core.clear()
        await self.view.clear()

    def action_cancel(self) -> None:
        if self.core.cancel():
            self.notify("cancelling…", timeout=2)

    @on(PromptInput.Submitted)
    async def _submitted(self, msg: PromptInput.Submitted) -> None:
        if await self.submit_text(msg.text):
            msg.prompt_input.clear_holding_height()

    async def submit_text(self, text: str) -> bool:
        """Start a turn for ``text`` (both slots in A/B mode); False when refused."""
        if self._ends_drawing or self._checking:
            self.notify("still answering — wait, or press Esc to cancel", severity="warning")
            return False
        if text.strip() and not self.core.busy:  # (else start_turn says why not)
            self._checking = True  # one prompt at a time while its servers are checked
            try:
                if not await self.listeners_unchanged():
                    return False
            finally:
                self._checking = False
        try:
            requests = self.core.start_turn(text)
        except Refused as e:
            self.notify(str(e), severity="warning")
            return False
        for slot, req in requests.items():
            await self.view.add_turn(slot, text, req.request_id)
        self._frame_timer.resume()
        if any(shares_cores_with_ui(self.host(slot).spec) for slot in requests):
            self._start_when_painted(requests)
        else:
            self._start(requests)
        return True

    def _start(self, requests: dict[str, GenerationRequest]) -> None:
        names = " vs ".join(self.core.engine_of(s) for s in requests)
        self.run_worker(
            self.core.run_turn(requests),
            group="turn",
            exclusive=True,
            exit_on_error=False,
            description=f"turn {self.core.turn_no} on {names}",
        )

    def _start_when_painted(self, requests: dict[str, GenerationRequest]) -> None:
        """Run the turn once the screen has been refreshed with its new turn, for an
        engine that shares the UI's few cores: laying out and painting a new turn is the
        UI's costliest moment of an answer (~3x its rate while text streams), and done
        before the engine starts it takes no core from the engine's prefill and first
        tokens (docs/performance.md#watching). What waits is the request's send, from
        which every number is measured (20-70 ms on 2 cores); at most
        :data:`START_AT_LATEST_S`, should no refresh come."""
        started = False

        def start() -> None:
            nonlocal started
            if not started:
                started = True
                timer.stop()
                self._start(requests)

        timer = self.set_timer(START_AT_LATEST_S, start)
        self.call_after_refresh(start)

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
        await self.view.draw_text()
        self._frames += 1
        if self._frames % NUMBERS_EVERY != 1 % NUMBERS_EVERY:
            return  # a frame of text alone: Textual paints only the panes' changed lines
        self.view.refresh_live()
        if self._sample_due:
            self._sample_due = False
            self.view.show_hardware()

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
            self.view.answer_waiting(event)
        elif isinstance(event, AnswerEnded):
            try:
                await self.view.answer_ended(event)
            finally:
                self._ends_drawing -= 1
        elif isinstance(event, TurnEnded):
            self._frame_timer.pause()
            self.query_one("#prompt", PromptInput).release_height()
            self.call_after_refresh(self._settle_heap)  # after the final answer is painted
            self.view.turn_ended(event)
        elif isinstance(event, Notice):
            self.notify(event.text, severity=event.severity, timeout=8)  # type: ignore[arg-type]

    def _settle_heap(self) -> None:
        """Full GC between requests, never during one (see tui/core/pauses.py)."""
        if not self.busy:
            settle_heap()

    # -- telemetry ------------------------------------------------------------------
    @on(KvUpdated)
    def _kv_updated(self, msg: KvUpdated) -> None:
        self.view.show_kv(msg.engine, msg.state)

    @on(ServerSampled)
    def _server_sampled(self, msg: ServerSampled) -> None:
        if msg.engine == self.core.slot_engine["A"]:
            self.query_one(ServerPanel).show_lines(msg.lines)
            self.view.show_engine_short(msg.short if msg.lines is not None else "")

    @on(TelemetrySampled)
    def _telemetry(self, msg: TelemetrySampled) -> None:
        self.view.sampled(msg.sample, self.busy)
        self._sample_due = self.busy  # drawn with the next frame, with the text
