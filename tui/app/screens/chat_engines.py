"""ChatEngines: the chat screen's engine slots — loading, switching (Ctrl+N, the palette),
A/B on and off — and what follows an engine's state (its hardware, its server's metrics).

A mixin of :class:`~tui.app.screens.chat.ChatScreen`: the slots themselves are the chat
core's (tui/chat/core.py); this only starts the workers and asks the view to draw.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from pathlib import Path

from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import get_current_worker

from tui.app.app_api import discovery_host
from tui.app.listeners import changed_note, loopback_port
from tui.app.messages import KvUpdated, ModelsListed, ServerSampled
from tui.app.screens.chat_view import ChatView
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.server_panel import ServerPanel
from tui.chat.catalog import Choice
from tui.chat.core import ChatCore, Refused
from tui.chat.events import EngineStateChanged
from tui.chat.hardware import HardwareWatch
from tui.chat.host import IDLE, EngineHost
from tui.chat.server_watch import watch_server
from tui.engines.kinds import find_kind


class EngineChosen(Message):
    """Slot A now uses ``engine`` (the app remembers it for the next start)."""

    def __init__(self, engine: str) -> None:
        super().__init__()
        self.engine = engine


class ChatEngines(Screen[None]):
    b_chosen = False  # the user picked B's engine (Ctrl+O then offers nothing)
    _loading: dict[str, tuple[float, str]]  # slot -> (loading since, what it reads)
    _loading_timer: Timer | None = None
    core: ChatCore
    view: ChatView
    hardware: HardwareWatch
    telemetry: bool

    def focus_prompt(self) -> None:
        """Give the prompt the keyboard (the chat screen does)."""

    def _settle_heap(self) -> None:
        """Full GC between requests (the chat screen does)."""

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
        self._chosen(name)
        if slot == "B":
            self.b_chosen = True
        if old == name:
            return  # unchanged
        self._slot_now_runs(slot, name)
        if old is not None:
            self._close(self.core.release(old), old)

    def _chosen(self, name: str) -> None:
        """The user chose engine ``name``: a server discovery found is sent to whoever
        listens on its port now (tui/app/listeners.py), even after a refusal."""
        host = discovery_host(self.app)
        spec = self.core.config.engines.get(name)
        if host is not None and spec is not None:
            host.listeners.chosen(spec)

    async def listeners_unchanged(self) -> bool:
        """Before a prompt: each found server it goes to is still listened on by the
        process trusted (read in a thread); False, with a notification for each one
        that is not, when the prompt must not be sent."""
        host = discovery_host(self.app)
        if host is None:
            return True
        engines = {self.core.slot_engine.get(slot) for slot in self.core.slots()}
        specs = [self.core.config.engines[n] for n in engines if n in self.core.config.engines]
        ports = host.listeners.ports(specs)
        if not ports:
            return True
        changed = await asyncio.to_thread(host.listeners.changed, ports)
        for owner in changed:
            for spec in specs:
                if loopback_port(spec) == owner.port:
                    self.notify(changed_note(spec.name, owner), severity="warning", timeout=15)
        return not changed

    def _slot_now_runs(self, slot: str, name: str) -> None:
        """Slot ``slot`` now runs engine ``name``: its panels start afresh and it loads
        (slot B only in A/B mode)."""
        if slot == "A":
            self.query_one(ServerPanel).show_lines(None)
            self.view.show_kv(name, None)
            self.post_message(EngineChosen(name))
            self.hardware.follow(name)
        self.view.show_slot(slot)
        if slot == "A" or self.core.ab:
            self._start_load(slot)

    def _close(self, host: EngineHost | None, name: str) -> None:
        """Close a released engine in a thread (its worker process, its connections)."""
        if host is not None:
            self.run_worker(
                host.close,
                thread=True,
                group=f"close-{name}",
                exit_on_error=False,
                description=f"close engine {name}",
            )

    def use_model(self, slot: str, name: str, model: str) -> None:
        """Point a slot at a model on a server (the palette's ``engine › model``): the
        next request names it."""
        old = self.core.slot_engine.get(slot)
        try:
            name, stale = self.core.use_model(slot, name, model)
        except Refused as e:
            self.notify(str(e), severity="warning")
            return
        self._chosen(name)
        if slot == "B":
            self.b_chosen = True
        self._close(stale, name)
        if old is not None and old != name:
            self._close(self.core.release(old), old)
        self._slot_now_runs(slot, name)
        self.notify(f"slot {slot}: {name} › {model}", timeout=3)
        self.focus_prompt()

    def action_next_engine(self) -> None:
        try:
            self.use_engine("A", self.core.next_engine())
        except Refused as e:
            self.notify(str(e))
        self.focus_prompt()

    def action_toggle_ab(self) -> None:
        """Ctrl+O: A/B on or off. Turning it on with no engine chosen for B while
        discovery found servers offers them first (the same model on another engine at
        the top): Enter takes the first."""
        candidates = self._ab_offer()
        if candidates:
            from tui.app.screens.ab_picker import ABPicker

            self.app.push_screen(ABPicker(candidates), self._ab_picked)
            return
        self._toggle_ab()

    def _ab_offer(self) -> list[Choice]:
        host = discovery_host(self.app)
        if self.core.ab or self.b_chosen or host is None or not host.catalog.discovered:
            return []
        return host.catalog.ab_candidates(self.core.config, self.core.engine_of("A"))

    def _ab_picked(self, choice: Choice | None) -> None:
        if choice is None:
            self.focus_prompt()
            return
        if choice.model is None:
            self.use_engine("B", choice.engine)
        else:
            self.use_model("B", choice.engine, choice.model)
        if self.core.slot_engine["B"] not in (None, self.core.slot_engine["A"]):
            self._toggle_ab()

    def _toggle_ab(self) -> None:
        try:
            on_now = self.core.toggle_ab()
        except Refused as e:
            self.notify(str(e))
            return
        self.set_class(on_now, "-ab")
        if on_now:
            self.view.show_slot("B")
            self._start_load("B")
        self.query_one(EngineBar).set_ab(on_now)
        self.view.show_slot("A")  # titles say which slot is which
        self.focus_prompt()
        how = f" ({self.core.ab_plan().label})" if on_now else ""
        self.notify(f"A/B mode {'on' if on_now else 'off'}{how}")

    def _engine_state(self, msg: EngineStateChanged) -> None:
        if self.core.slot_engine.get(msg.slot) != msg.engine:
            return  # about an engine this slot no longer uses
        self.view.show_slot(msg.slot)
        self.query_one(EngineBar).set_state(msg.slot, msg.state, msg.detail)
        self._follow_loading(msg.slot, msg.engine, msg.state)
        if msg.state == "error":
            self.notify(f"engine {msg.engine}: {msg.detail}", severity="error", timeout=8)
        if msg.state == "ready":
            self.call_after_refresh(self._settle_heap)  # loading made many objects
            self._list_models(msg.engine)
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

    def _list_models(self, name: str) -> None:
        """A server engine that is ready: its models join the palette (once per engine;
        servers discovery found are listed already)."""
        host = discovery_host(self.app)
        spec = self.core.config.engines.get(name)
        if host is None or spec is None or name in host.catalog.models:
            return
        kind = find_kind(spec.kind)  # a server kind lists its models
        if kind is None or not kind.http or not spec.url:
            return
        host.catalog.models[name] = []  # asked once, whatever the answer

        def list_them() -> None:
            from tui.engines.base import EngineError
            from tui.engines.servers.server_models import list_server_models

            try:
                models = list_server_models(spec, self.core.config.discovery.timeout_s * 2)
            except EngineError:
                return
            self.app.post_message(ModelsListed(name, models))

        self.run_worker(
            list_them, thread=True, exit_on_error=False, description=f"models of {name}"
        )

    def _follow_loading(self, slot: str, engine: str, state: str) -> None:
        """While a slot's engine loads, the engine bar says for how long (and how big a
        GGUF it reads): a progress line, twice a second."""
        if state != "loading":
            self._loading.pop(slot, None)
            return
        spec = self.core.config.engines.get(engine)
        size = ""
        if spec is not None and spec.kind == "llamacpp" and spec.model not in (None, "default"):
            from tui.engines.servers.server_models import human_size

            try:
                size = f" · reading {human_size(Path(str(spec.model)).stat().st_size)} GGUF"
            except OSError:
                size = ""
        self._loading[slot] = (time.monotonic(), size)
        if self._loading_timer is None:
            self._loading_timer = self.set_interval(0.5, self._loading_tick)
        self._loading_tick()

    def _loading_tick(self) -> None:
        bar = self.query_one(EngineBar)
        for slot, (since, size) in list(self._loading.items()):
            if bar.slots.get(slot) is None or bar.slots[slot].state != "loading":
                self._loading.pop(slot, None)
                continue
            bar.set_state(slot, "loading", f"{time.monotonic() - since:.0f} s{size}")

    def _server_metrics(self, name: str) -> None:
        """Thread worker: the engine's server-side metrics at the telemetry interval."""
        worker = get_current_worker()
        short = [""]  # the read's one-line form, posted with its lines

        def keep_short(text: str) -> None:
            short[0] = text

        watch_server(
            self.core.config.engines[name],
            self.core.kv_layout(name),
            self.core.config.telemetry.interval_s,
            lambda: worker.is_cancelled,
            lambda lines: self.post_message(ServerSampled(name, lines, short[0])),
            lambda state: self.post_message(KvUpdated(name, state)),
            keep_short,
        )
