"""ChatScreen: prompt, streaming output pane(s), metrics and hardware panels, engine bar.

The screen is the controller of a conversation: it starts Textual workers for engine
loads and turns, and updates widgets only from message handlers and its frame timer.
Engine coroutines run on each engine's own thread (EngineHost); their events accumulate
in a LiveRequest, stamped where they happen.

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
import time
from collections.abc import Iterable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Static

from tui.app.answer_energy import AnswerEnergy
from tui.app.engine_host import ERROR
from tui.app.format import summary_line
from tui.app.messages import (
    EngineStateChanged,
    KvUpdated,
    ServerSampled,
    TelemetrySampled,
)
from tui.app.screens.engine_slots import EngineSlots, next_name, windows
from tui.app.widgets.ab_table import ABTable, ab_ratio_text
from tui.app.widgets.compact_metrics import CompactMetrics
from tui.app.widgets.conversation import Conversation, Turn
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.hardware_panel import HardwarePanel
from tui.app.widgets.kv_line import KvLine, kv_short
from tui.app.widgets.metrics_panel import MetricsPanel
from tui.app.widgets.prompt import PromptInput
from tui.app.widgets.server_panel import ServerPanel
from tui.app.widgets.strip import strip_text
from tui.core.events import ContextFill, Failed
from tui.core.kv import state_from_fill
from tui.core.live import LiveRequest, LiveSnapshot
from tui.core.metrics import RequestMetrics, compute_metrics
from tui.core.pauses import defer_full_collections, resume_full_collections
from tui.core.timeline import RequestTimeline
from tui.core.window import RollingWindow
from tui.engines.base import CancelToken, EngineError, GenerationRequest
from tui.engines.placement import CONCURRENT, SEQUENTIAL, ABPlan, turn_order
from tui.telemetry.sampler import TelemetrySample

NARROW_WIDTH = 110
SHORT_HEIGHT = 30
NUMBERS_EVERY = 5  # live numbers and hardware are drawn every this many frames (2 Hz)
HISTORY_MESSAGES = 8  # multi-turn context kept per pane (user + assistant messages)


class ChatScreen(EngineSlots):
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel", priority=True),
        Binding("ctrl+n", "next_engine", "Engine", id="next_engine", priority=True),
        Binding("ctrl+o", "toggle_ab", "A/B", id="ab", priority=True),
        Binding("f2", "toggle_panels", "Panels", id="panels", priority=True),
        Binding("ctrl+l", "clear", "Clear", id="clear", priority=True, show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="chat")
        self.slot_engine: dict[str, str | None] = {"A": None, "B": None}
        self.ab = False
        self.busy = False
        self.turn_no = 0
        self.turns: dict[tuple[str, str], Turn] = {}
        self.live: dict[str, LiveRequest | None] = {"A": None, "B": None}
        self.cancels: dict[str, CancelToken] = {}
        self.messages: dict[str, list[dict[str, str]]] = {"A": [], "B": []}
        self.history: dict[str, dict[str, RollingWindow]] = {"A": windows(), "B": windows()}
        self.last_metrics: dict[str, RequestMetrics | None] = {"A": None, "B": None}
        self.last_sample: TelemetrySample | None = None
        self._load_locks: dict[str, asyncio.Lock] = {}
        self._kv_fill_shown: dict[str, ContextFill] = {}
        self._ratios = ""  # B/A, live while both stream (A/B mode)
        self._kv_short = ""  # slot A's KV cache, for the narrow strip
        self._energy = AnswerEnergy()  # answers waiting for their J/token

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
        app = self.app
        names = list(app.config.engines)
        first = app.initial_engine
        self.slot_engine["A"] = first
        self.slot_engine["B"] = next_name(names, first)
        self._show_slot("A")
        self.query_one("#prompt", PromptInput).focus()
        self._layout_for(self.size.width, self.size.height)
        self._frame_timer = self.set_interval(
            1.0 / max(1.0, app.config.ui.refresh_hz), self._frame, pause=True
        )
        self._sample_due = False  # a hardware sample waits for the next frame
        self._frames = 0
        # after the first frame: the engine import/load must not delay the first paint
        if app.load_on_start:
            self.call_after_refresh(self._start_load, "A")
        if app.autoplay:
            self.run_worker(
                self.autoplay(app.autoplay),
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
        self._update_strip()

    def action_toggle_panels(self) -> None:
        if self.has_class("-narrow"):
            self.toggle_class("-show-panels")
            if not self.has_class("-show-panels"):
                self.focus_prompt()
        else:
            self.notify("panels are already shown beside the chat")

    def focus_prompt(self) -> None:
        """Give the prompt the keyboard (after F2, a closed screen or palette, an engine
        switch): what one types next goes into it."""
        if not self.has_class("-show-panels"):
            self.query_one("#prompt", PromptInput).focus()

    def on_screen_resume(self) -> None:
        self.focus_prompt()

    async def action_clear(self) -> None:
        if self.busy:
            self.notify("an answer is still streaming — Esc cancels it first", severity="warning")
            return
        for slot in ("A", "B"):
            await self.query_one(f"#conv-{slot}", Conversation).clear()
            self.messages[slot] = []
        self.turns.clear()

    def action_cancel(self) -> None:
        if not self.busy:
            return
        for token in self.cancels.values():
            token.cancel()
        self.notify("cancelling…", timeout=2)

    # -- a turn ---------------------------------------------------------------------
    @on(PromptInput.Submitted)
    async def _submitted(self, msg: PromptInput.Submitted) -> None:
        if await self.submit_text(msg.text):
            msg.prompt_input.clear()

    async def submit_text(self, text: str) -> bool:
        """Start a turn for ``text`` (both slots in A/B mode); False when refused."""
        if not text.strip():
            self.notify("the prompt is empty — type something first", severity="warning")
            return False
        if self.busy:
            self.notify("still answering — wait, or press Esc to cancel", severity="warning")
            return False
        self.busy = True
        defer_full_collections()  # until the turn ends (see tui/core/pauses.py)
        self.turn_no += 1
        slots = ["A", "B"] if self.ab else ["A"]
        requests: dict[str, GenerationRequest] = {}
        for slot in slots:
            name = self.slot_engine[slot]
            assert name is not None
            req = self._request(slot, text)
            requests[slot] = req
            conv = self.query_one(f"#conv-{slot}", Conversation)
            turn = await conv.add_turn(text, name, req.request_id)
            self.turns[(slot, req.request_id)] = turn
        names = " vs ".join(str(self.slot_engine[s]) for s in slots)
        self._frame_timer.resume()
        self.run_worker(
            self._run_turn(text, requests, self.turn_no),
            group="turn",
            exclusive=True,
            exit_on_error=False,
            description=f"turn {self.turn_no} on {names}",
        )
        return True

    async def autoplay(self, prompts: list[str]) -> None:
        """Submit prompts one after another (``infertop replay``); a worker runs this."""
        for prompt in prompts:
            while self.busy:
                await asyncio.sleep(0.05)
            host = await self._ensure_loaded("A")
            if host is None:
                return
            await self.submit_text(prompt)
            await asyncio.sleep(0.05)
        while self.busy:
            await asyncio.sleep(0.05)
        self.notify(f"replay finished: {len(prompts)} request(s)", timeout=10)

    def _request(self, slot: str, prompt: str) -> GenerationRequest:
        g = self.app.config.generation
        messages = self.messages[slot][-HISTORY_MESSAGES:] + [{"role": "user", "content": prompt}]
        return GenerationRequest(
            messages=messages,
            max_tokens=g.max_tokens,
            temperature=g.temperature,
            top_p=g.top_p,
            seed=g.seed,
        )

    async def _run_turn(
        self, prompt: str, requests: dict[str, GenerationRequest], turn: int
    ) -> None:
        results: dict[str, RequestMetrics | None] = {}
        plan = self.ab_plan() if len(requests) > 1 else None
        try:
            if plan is not None and plan.schedule == CONCURRENT:
                out = await asyncio.gather(
                    *(self._run_slot(s, r, turn) for s, r in requests.items())
                )
                results = dict(zip(requests, out, strict=True))
            else:
                order = turn_order(turn, tuple(requests)) if plan is not None else list(requests)
                for k, slot in enumerate(order):
                    for later in order[k + 1 :]:
                        self._show_waiting(later, requests[later], slot, plan)
                    results[slot] = await self._run_slot(slot, requests[slot], turn)
        finally:
            self.cancels.clear()
            self.busy = False
            resume_full_collections()
            self._frame_timer.pause()
            self.call_after_refresh(self._settle_heap)  # after the final answer is painted
        a, b = results.get("A"), results.get("B")
        if a is not None and b is not None and plan is not None:
            self.query_one(ABTable).add_turn(turn, a, b, plan)
            self._show_ratios({})  # the turn's B/A, whatever frame drew last

    def _show_waiting(
        self, slot: str, request: GenerationRequest, first: str, plan: ABPlan | None
    ) -> None:
        """The slot that waits its turn in a sequential A/B says why."""
        turn = self.turns.get((slot, request.request_id))
        if turn is not None and plan is not None:
            turn.waiting(f"waits for {first} to finish: {plan.label}")

    async def _run_slot(self, slot: str, request: GenerationRequest, turn: int) -> RequestMetrics:
        name = self.slot_engine[slot]
        assert name is not None
        live = LiveRequest(request.request_id)  # the frame timer reads it
        self.live[slot] = live
        cancel = self.cancels[slot] = CancelToken()
        host = await self._ensure_loaded(slot)
        if host is None:
            now = time.perf_counter_ns()
            live.add(
                Failed(now, f"engine {name} is not available: {self.app.host(name).error}", "load")
            )
        elif cancel.cancelled:
            live.add(Failed(time.perf_counter_ns(), "cancelled before it started", "cancelled"))
        else:
            self.post_message(EngineStateChanged(slot, name, "generating"))
            try:
                await host.stream(request, cancel, live.add)
            except EngineError as e:
                live.add(Failed(time.perf_counter_ns(), str(e), "engine"))
            state = "error" if host.state == ERROR else "ready"
            self.post_message(EngineStateChanged(slot, name, state, host.error or ""))
        metrics = compute_metrics(live.timeline)
        await self.app.record(slot, name, request, live, metrics)
        # drawn before the turn counts as over (a Ctrl+L right after must find it drawn)
        await self._answer_ended(slot, live, metrics)
        return metrics

    async def _frame(self) -> None:
        """Timer, while a turn runs: one frame (see the module docstring)."""
        for slot in ("A", "B") if self.ab else ("A",):
            live = self.live[slot]
            if live is None or live.done:
                continue
            turn = self.turns.get((slot, live.request_id))
            text = live.drain()
            if turn is not None and text and not turn.finished:
                await turn.append(text)
        self._frames += 1
        if self._frames % NUMBERS_EVERY != 1 % NUMBERS_EVERY:
            return  # a frame of text alone: Textual paints only the panes' changed lines
        self._refresh_live()
        if self._sample_due:
            self._sample_due = False
            self._show_hardware()

    async def _answer_ended(self, slot: str, live: LiveRequest, m: RequestMetrics) -> None:
        """An answer ended (finished, cancelled or failed; ``m`` final): its pane, its
        history and the panels show the end."""
        turn = self.turns.get((slot, live.request_id))
        if turn is not None:
            await turn.append(live.drain())
            state = "cancelled" if m.finish_reason == "cancelled" else ("error" if m.error else "")
            await turn.finish(summary_line(m), state)
            if not state:
                self._await_energy(turn, live.timeline, m.output_tokens)
            if m.error:
                self.notify(f"{turn.engine}: {m.error}", severity="error", timeout=8)
        if live.timeline.text:
            req_prompt = turn.prompt if turn is not None else ""
            self.messages[slot] += [
                {"role": "user", "content": req_prompt},
                {"role": "assistant", "content": live.timeline.text},
            ]
        self._push_history(slot, m)
        self._show_history(slot)
        self.metrics_panel(slot).show_live(live.snapshot())
        self._show_context_fill(slot, live.snapshot().context_fill)
        if slot == "A":
            self._show_hardware()

    def _push_history(self, slot: str, m: RequestMetrics) -> None:
        if m.ttft_ms is None:
            return
        self.last_metrics[slot] = m
        w = self.history[slot]
        w["ttft"].push(m.ttft_ms)
        if m.itl_ms_p50 is not None:
            w["itl"].push(m.itl_ms_p50)
        if m.decode_tps is not None:
            w["decode"].push(m.decode_tps)
        if m.prefill_tps is not None:
            w["prefill"].push(m.prefill_tps)

    def _show_slot(self, slot: str) -> None:
        super()._show_slot(slot)
        self._title_panels()

    def _title_panels(self) -> None:
        """In A/B mode each metrics panel says whose numbers it shows."""
        for slot in ("A", "B"):
            name = self.slot_engine[slot]
            title = f"metrics · {slot}: {name}" if self.ab and name else "metrics"
            self.metrics_panel(slot).border_title = title

    def metrics_panel(self, slot: str) -> MetricsPanel:
        return self.query_one("#metrics" if slot == "A" else "#metrics-B", MetricsPanel)

    def _show_history(self, slot: str = "A") -> None:
        hist = {k: w.snapshot() for k, w in self.history[slot].items()}
        self.metrics_panel(slot).show_history(hist, self.last_metrics[slot])
        self.query_one(CompactMetrics).slot(slot).show_history(hist, self.last_metrics[slot])
        self._update_strip()

    def _refresh_live(self) -> None:
        """Copy the running requests' live numbers into the panels that are shown."""
        snaps: dict[str, LiveSnapshot] = {}
        narrow = self.has_class("-narrow")
        for slot in ("A", "B") if self.ab else ("A",):
            live = self.live[slot]
            if live is not None and not live.done:
                snap = snaps[slot] = live.snapshot()
                if not narrow or self.has_class("-show-panels"):
                    self.metrics_panel(slot).show_live(snap)
                if narrow:
                    self.query_one(CompactMetrics).slot(slot).show_live(snap)
                self._show_context_fill(slot, snap.context_fill)
        if self.ab:
            self._show_ratios(snaps)
        self._update_strip()

    def _show_ratios(self, snaps: dict[str, LiveSnapshot]) -> None:
        """B/A while both stream (live values), else of the last finished turn."""
        how = "seq" if self.ab_plan().schedule == SEQUENTIAL else "conc"
        text = ab_ratio_text(snaps.get("A"), snaps.get("B"), self.last_metrics, how)
        self.query_one("#ratios", Static).update(text, layout=False)
        self._ratios = text

    def _update_strip(self) -> None:
        if not self.has_class("-narrow"):
            return
        self.query_one("#strip", Static).update(
            strip_text(
                self._ratios if self.ab else "",
                self._kv_short,
                self.last_sample,
                self.size.width - 2,
            ),
            layout=False,
        )

    def _show_context_fill(self, slot: str, fill: ContextFill | None) -> None:
        """The engine's own token count (ContextFill) with its model's KV layout."""
        name = self.slot_engine[slot]
        if fill is None or name is None or fill is self._kv_fill_shown.get(slot):
            return
        self._kv_fill_shown[slot] = fill
        layout, unknown = self.kv_layout(name)
        state = state_from_fill(fill.tokens, fill.n_ctx, layout, unknown, fill.t_ns)
        self.post_message(KvUpdated(name, state))

    @on(KvUpdated)
    def _kv_updated(self, msg: KvUpdated) -> None:
        if msg.engine == self.slot_engine["A"]:
            self.query_one(KvLine).show(msg.state)
            self._kv_short = kv_short(msg.state)
            self._update_strip()

    # -- telemetry ------------------------------------------------------------------
    @on(ServerSampled)
    def _server_sampled(self, msg: ServerSampled) -> None:
        if msg.engine == self.slot_engine["A"]:
            self.query_one(ServerPanel).show_lines(msg.lines)

    @on(TelemetrySampled)
    def _telemetry(self, msg: TelemetrySampled) -> None:
        self.last_sample = msg.sample
        if self.busy:  # drawn with the next frame, in the same paint as the text
            self._sample_due = True
            return
        self._show_hardware()
        self._update_strip()
        if self._energy.waiting:
            self._energy.settle(self.app.sampler.energy)

    def _await_energy(self, turn: Turn, tl: RequestTimeline, tokens: int | None) -> None:
        """Its J/token joins the answer's summary later (tui/app/answer_energy.py) when
        the hardware sampled is the one that ran it (its engine's telemetry source)."""
        app = self.app
        if getattr(app, "telemetry_enabled", False) and app.hardware_for(turn.engine) == getattr(
            app, "hardware_key", None
        ):
            self._energy.expect(turn, tl, tokens)

    def _show_hardware(self) -> None:
        if self.last_sample is None:
            return
        roof = self.app.roofline_text(
            self.slot_engine["A"], self.last_metrics["A"], self.last_sample
        )
        self.query_one(HardwarePanel).show(self.last_sample, self.app.sampler.cpu.snapshot(), roof)


def engine_names(names: Iterable[str]) -> list[str]:
    return list(names)
