"""EngineSlots: the chat screen's two engine slots (A, and B in A/B mode).

Which configured engine each slot uses, loading it in a worker (off the UI loop, one
load per engine at a time), showing its state in the engine bar, switching engines
(Ctrl+N, the command palette) and turning A/B mode on and off. ChatScreen's base
class: it uses the screen's state (``slot_engine``, ``ab``, ``busy``, the per-slot history).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.screen import Screen
from textual.worker import get_current_worker

from tui.app.engine_host import GENERATING, IDLE, READY, EngineHost
from tui.app.messages import EngineStateChanged, KvUpdated, ServerSampled
from tui.app.widgets.engine_bar import EngineBar, SlotView
from tui.app.widgets.kv_line import KvLine
from tui.app.widgets.server_panel import ServerPanel
from tui.core.kv import KvLayout
from tui.core.pauses import settle_heap
from tui.core.window import RollingWindow
from tui.engines.base import EngineError
from tui.engines.placement import ABPlan, ab_plan
from tui.telemetry.server import server_probe

if TYPE_CHECKING:
    from tui.core.metrics import RequestMetrics


class EngineSlots(Screen):
    """A screen with engine slots (ChatScreen's base): ``slot_engine`` maps "A"/"B" to
    engine names; ChatScreen owns the state declared here."""

    slot_engine: dict[str, str | None]
    ab: bool
    busy: bool
    history: dict[str, dict[str, RollingWindow]]
    last_metrics: dict[str, RequestMetrics | None]
    messages: dict[str, list[dict[str, str]]]
    _load_locks: dict[str, asyncio.Lock]
    _kv_short: str
    app: Any

    def host(self, slot: str) -> EngineHost:
        name = self.slot_engine[slot]
        assert name is not None
        return self.app.host(name)

    def kv_layout(self, name: str) -> tuple[KvLayout | None, str]:
        """The KV layout the engine named ``name`` reported (tui/core/kv.py), or (None,
        why it is unknown)."""
        info = self.app.host(name).info()
        params = info.parameters if info is not None else {}
        d = params.get("kv_layout")
        if isinstance(d, dict):
            return KvLayout.from_dict(d), ""
        return None, str(params.get("kv_layout_unknown") or "the engine does not say")

    def _show_slot(self, slot: str) -> None:
        name = self.slot_engine[slot]
        if name is None:
            return
        spec = self.app.config.engines[name]
        host = self.app.host(name)
        info = host.info()
        model = info.model if info else (spec.model or spec.url or "")
        detail = host.error or ""
        self.query_one(EngineBar).set_slot(
            slot,
            SlotView(
                engine=name,
                kind=spec.kind,
                model=short_model(model),
                state=host.state,
                detail=detail,
            ),
        )

    def _start_load(self, slot: str) -> None:
        self.run_worker(
            self._ensure_loaded(slot),
            group=f"load-{slot}",
            exclusive=True,
            exit_on_error=False,
            description=f"load engine for slot {slot}",
        )

    async def _ensure_loaded(self, slot: str) -> EngineHost | None:
        """Load the slot's engine if needed (off the UI loop); None when it failed."""
        name = self.slot_engine[slot]
        assert name is not None
        host = self.app.host(name)
        lock = self._load_locks.setdefault(name, asyncio.Lock())
        async with lock:
            if host.state in (READY, GENERATING) and host.engine is not None:
                return host
            self.post_message(EngineStateChanged(slot, name, "loading"))
            try:
                load_ms = await host.load()
            except EngineError as e:
                self.post_message(EngineStateChanged(slot, name, "error", str(e)))
                return None
            self.post_message(
                EngineStateChanged(slot, name, "ready", f"loaded in {load_ms:.0f} ms")
            )
            return host

    def ensure_loaded(self, slot: str) -> None:
        """Start loading the slot's engine unless it is loaded, loading or failed."""
        if self.slot_engine.get(slot) is None or self.host(slot).state != IDLE:
            return
        if any(w.group == f"load-{slot}" and not w.is_finished for w in self.workers):
            return  # a load is about to start
        self._start_load(slot)

    def on_engine_state_changed(self, msg: EngineStateChanged) -> None:
        if self.slot_engine.get(msg.slot) != msg.engine:
            return  # a message about an engine this slot no longer uses
        self._show_slot(msg.slot)
        self.query_one(EngineBar).set_state(msg.slot, msg.state, msg.detail)
        if msg.state == "error":
            self.notify(f"engine {msg.engine}: {msg.detail}", severity="error", timeout=8)
        if msg.state == "ready":
            self.call_after_refresh(self._settle_heap)  # loading made many objects
        if msg.slot == "A" and msg.state == "ready":
            info = self.host("A").info()
            self.app.watch_pid(info.pid if info else None)
            if self.app.telemetry_enabled:
                self.run_worker(
                    partial(self._server_metrics, msg.engine),
                    thread=True,
                    group="server-telemetry",
                    exclusive=True,
                    exit_on_error=False,
                    description=f"server metrics of {msg.engine}",
                )

    def use_engine(self, slot: str, name: str) -> None:
        """Point a slot at a configured engine (engine switch / command palette)."""
        if name not in self.app.config.engines:
            self.notify(f"no engine named {name!r} in config", severity="error")
            return
        if self.busy:
            self.notify("an answer is still streaming — Esc cancels it first", severity="warning")
            return
        old = self.slot_engine[slot]
        if old == name:
            return
        self.slot_engine[slot] = name
        if slot == "A":
            self.query_one(ServerPanel).show_lines(None)
            self.query_one(KvLine).show(None)
            self._kv_short = ""
        self.history[slot] = windows()
        self.last_metrics[slot] = None
        self.messages[slot] = []
        self._show_slot(slot)
        if slot == "A":
            self.app.remember(engine=name)
            self.app.follow_engine(name)
        if slot == "A" or self.ab:
            self._start_load(slot)
        if old is not None and old not in self.slot_engine.values():
            self.app.release_host(old)

    def action_next_engine(self) -> None:
        names = list(self.app.config.engines)
        if len(names) < 2:
            self.notify("only one engine is configured: add [engines.NAME] tables to config")
            return
        nxt = next_name(names, self.slot_engine["A"])
        if self.ab and nxt == self.slot_engine["B"]:
            nxt = next_name(names, nxt)
        self.use_engine("A", nxt)
        self.focus_prompt()

    def focus_prompt(self) -> None:
        """Give the prompt the keyboard (the chat screen does)."""

    def action_toggle_ab(self) -> None:
        names = list(self.app.config.engines)
        if not self.ab and len(names) < 2:
            self.notify("A/B needs two engines: add another [engines.NAME] table to config")
            return
        if self.busy:
            self.notify("an answer is still streaming — Esc cancels it first", severity="warning")
            return
        self.ab = not self.ab
        self.set_class(self.ab, "-ab")
        if self.ab:
            if self.slot_engine["B"] in (None, self.slot_engine["A"]):
                self.slot_engine["B"] = next_name(names, self.slot_engine["A"])
            self._show_slot("B")
            self._start_load("B")
        self.query_one(EngineBar).set_ab(self.ab)
        self._show_slot("A")  # titles say which slot is which
        self.focus_prompt()
        how = f" ({self.ab_plan().label})" if self.ab else ""
        self.notify(f"A/B mode {'on' if self.ab else 'off'}{how}")

    def ab_plan(self) -> ABPlan:
        """How A/B turns run now: one after the other when A and B share a machine."""
        a, b = (self.app.config.engines[str(self.slot_engine[s])] for s in ("A", "B"))
        return ab_plan(a, b, self.app.config.ui.ab_schedule)

    def _settle_heap(self) -> None:
        """Full GC between requests, never during one (see tui/core/pauses.py)."""
        if not self.busy:
            settle_heap()

    def _server_metrics(self, name: str) -> None:
        """Thread worker: scrape the engine's server at the telemetry interval."""
        worker = get_current_worker()
        from tui.engines.http_common import access_for  # httpx: not on the start-up path

        spec = self.app.config.engines[name]
        try:
            access = access_for(spec) if spec.url else None
        except EngineError as e:
            self.post_message(ServerSampled(name, [f"server metrics: {e}"]))
            return
        layout, unknown = self.kv_layout(name)
        probe = server_probe(spec.kind, spec.url, access, layout, unknown)
        if probe is None:
            self.post_message(ServerSampled(name, None))
            return
        interval = self.app.config.telemetry.interval_s
        kv_shown = None
        while not worker.is_cancelled:
            self.post_message(ServerSampled(name, probe.sample()))
            if probe.kv is not None and probe.kv != kv_shown:  # only what changed
                kv_shown = probe.kv
                self.post_message(KvUpdated(name, probe.kv))
            deadline = time.monotonic() + max(interval, 0.5)
            while time.monotonic() < deadline and not worker.is_cancelled:
                time.sleep(0.05)


def windows() -> dict[str, RollingWindow]:
    """A fresh set of per-request metric windows for one slot."""
    return {k: RollingWindow(60) for k in ("ttft", "itl", "decode", "prefill")}


def next_name(names: list[str], current: str | None) -> str:
    if current not in names:
        return names[0]
    return names[(names.index(current) + 1) % len(names)]


def short_model(model: str, width: int = 40) -> str:
    if model.endswith(".gguf") or model.startswith(("/", "~", ".")):
        model = model.replace("\\", "/").rsplit("/", 1)[-1]
    return model if len(model) <= width else model[: width - 1] + "…"
