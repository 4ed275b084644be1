"""EngineSlots: which engine each chat slot uses, and the hosts that run them.

The part of :class:`~tui.chat.core.ChatCore` that is its engines and slots: slot A (and
B in A/B mode) each point at a configured engine; each engine runs in its own
:class:`~tui.chat.host.EngineHost` (loaded once, one load at a time); switching an
engine or a server's model, A/B on and off and the A/B plan, and an engine's KV state
from its stream's ContextFill. Refused while an answer streams (:class:`Refused`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from tui.chat.events import ChatEvent, EngineStateChanged
from tui.chat.host import GENERATING, READY, EngineHost
from tui.config import Config
from tui.core.events import ContextFill
from tui.core.kv import KvLayout, KvState, state_from_fill
from tui.core.metrics import RequestMetrics
from tui.core.window import RollingWindow
from tui.engines.base import EngineError, EngineInfo, EngineSpec
from tui.engines.placement import ABPlan, ab_plan

SLOTS = ("A", "B")
WINDOW = 60  # answers kept in each history window


class Refused(Exception):
    """The core will not do what was asked now; the message is for the user."""


def windows() -> dict[str, RollingWindow]:
    """A fresh set of per-answer metric windows for one slot."""
    return {k: RollingWindow(WINDOW) for k in ("ttft", "itl", "decode", "prefill")}


def next_name(names: list[str], current: str | None) -> str:
    if current not in names:
        return names[0]
    return names[(names.index(current) + 1) % len(names)]


class EngineSlots:
    """See the module docstring. The state is :class:`~tui.chat.core.ChatCore`'s (its
    ``__init__`` sets it)."""

    config: Config
    hosts: dict[str, EngineHost]
    slot_engine: dict[str, str | None]
    ab: bool
    busy: bool
    messages: dict[str, list[dict[str, str]]]
    history: dict[str, dict[str, RollingWindow]]
    last_metrics: dict[str, RequestMetrics | None]
    _emit: Callable[[ChatEvent], object]
    _host_spec: Callable[[EngineSpec], EngineSpec]
    _load_locks: dict[str, asyncio.Lock]

    # -- engines --------------------------------------------------------------------
    def host(self, name: str) -> EngineHost:
        if name not in self.hosts:
            self.hosts[name] = EngineHost(self._host_spec(self.config.engines[name]))
        return self.hosts[name]

    def slot_host(self, slot: str) -> EngineHost:
        return self.host(self.engine_of(slot))

    def engine_of(self, slot: str) -> str:
        name = self.slot_engine[slot]
        assert name is not None
        return name

    def release(self, name: str) -> EngineHost | None:
        """Forget an engine no slot uses any more; the caller closes the host it returns
        (closing may block: in a thread)."""
        if name in self.slot_engine.values():
            return None
        return self.hosts.pop(name, None)

    async def close(self) -> None:
        """Close every engine (each in a thread: closing may block)."""
        hosts, self.hosts = list(self.hosts.values()), {}
        await asyncio.gather(*(asyncio.to_thread(h.close) for h in hosts))

    def info(self, name: str) -> EngineInfo | None:
        host = self.hosts.get(name)
        return host.info() if host is not None else None

    async def ensure_loaded(self, slot: str) -> EngineHost | None:
        """Load the slot's engine if needed (off the caller's loop); None when it failed.
        One load per engine at a time; the listener hears loading, then ready or error."""
        name = self.engine_of(slot)
        host = self.host(name)
        lock = self._load_locks.setdefault(name, asyncio.Lock())
        async with lock:
            if host.state in (READY, GENERATING) and host.engine is not None:
                return host
            self._emit(EngineStateChanged(slot, name, "loading"))
            try:
                load_ms = await host.load()
            except EngineError as e:
                self._emit(EngineStateChanged(slot, name, "error", str(e)))
                return None
            self._emit(EngineStateChanged(slot, name, "ready", f"loaded in {load_ms:.0f} ms"))
            return host

    def kv_layout(self, name: str) -> tuple[KvLayout | None, str]:
        """The KV layout the engine reported (tui/core/kv.py), or (None, why unknown)."""
        info = self.info(name)
        params = info.parameters if info is not None else {}
        d = params.get("kv_layout")
        if isinstance(d, dict):
            return KvLayout.from_dict(d), ""
        return None, str(params.get("kv_layout_unknown") or "the engine does not say")

    def kv_state(self, slot: str, fill: ContextFill) -> KvState:
        """The slot's engine's KV cache from the engine's own token count."""
        layout, unknown = self.kv_layout(self.engine_of(slot))
        return state_from_fill(fill.tokens, fill.n_ctx, layout, unknown, fill.t_ns)

    # -- slots ----------------------------------------------------------------------
    def use_engine(self, slot: str, name: str) -> str | None:
        """Point ``slot`` at the configured engine ``name``; returns the engine it used
        before (``name`` itself when nothing changed; its host may be released). Refused
        while an answer streams, or for a name not in config."""
        if name not in self.config.engines:
            raise Refused(f"no engine named {name!r} in config")
        if self.busy:
            raise Refused("an answer is still streaming — Esc cancels it first")
        old = self.slot_engine[slot]
        if old == name:
            return name
        self.slot_engine[slot] = name
        self.history[slot] = windows()
        self.last_metrics[slot] = None
        self.messages[slot] = []
        return old

    def use_model(self, slot: str, name: str, model: str) -> tuple[str, EngineHost | None]:
        """Point ``slot`` at engine ``name`` asking for ``model`` from the next request on
        (a server with several models). The engine's spec in the running config names the
        model now — or, when the other slot uses that engine with another model, an engine
        ``NAME › MODEL`` joins the config for this one. Returns (the engine the slot uses,
        a host the caller closes or None). Refused as :meth:`use_engine` is."""
        if name not in self.config.engines:
            raise Refused(f"no engine named {name!r} in config")
        if self.busy:
            raise Refused("an answer is still streaming — Esc cancels it first")
        spec = self.config.engines[name]
        other = "B" if slot == "A" else "A"
        if spec.model != model and self.slot_engine[other] == name:
            derived = f"{name} › {model}"
            if derived not in self.config.engines:
                self.config.engines[derived] = dataclasses.replace(spec, name=derived, model=model)
            name, spec = derived, self.config.engines[derived]
        stale = None
        if spec.model != model:
            self.config.engines[name] = dataclasses.replace(spec, model=model)
            stale = self.hosts.pop(name, None)
        if self.slot_engine[slot] != name or stale is not None:
            self.slot_engine[slot] = name
            self.history[slot] = windows()
            self.last_metrics[slot] = None
            self.messages[slot] = []
        return name, stale

    def next_engine(self) -> str:
        """The engine Ctrl+N moves slot A to (never B's in A/B mode)."""
        names = list(self.config.engines)
        if len(names) < 2:
            raise Refused("only one engine is configured: add [engines.NAME] tables to config")
        nxt = next_name(names, self.slot_engine["A"])
        if self.ab and nxt == self.slot_engine["B"]:
            nxt = next_name(names, nxt)
        return nxt

    def toggle_ab(self) -> bool:
        """A/B on or off; returns the new state. B gets another engine than A."""
        names = list(self.config.engines)
        if not self.ab and len(names) < 2:
            raise Refused("A/B needs two engines: add another [engines.NAME] table to config")
        if self.busy:
            raise Refused("an answer is still streaming — Esc cancels it first")
        self.ab = not self.ab
        if self.ab and self.slot_engine["B"] in (None, self.slot_engine["A"]):
            self.slot_engine["B"] = next_name(names, self.slot_engine["A"])
        return self.ab

    def ab_plan(self) -> ABPlan:
        """How an A/B turn runs now: one after the other when A and B share a machine."""
        a, b = (self.config.engines[self.engine_of(s)] for s in SLOTS)
        return ab_plan(a, b, self.config.ui.ab_schedule)

    def slots(self) -> tuple[str, ...]:
        return SLOTS if self.ab else ("A",)
