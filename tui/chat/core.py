"""ChatCore: a conversation with one engine, or two side by side (A/B), without a screen.

The core is what a chat turn is, for every front end (the TUI, ``infertop run``):

- which engine each slot uses (A, and B in A/B mode), and the hosts that run them
  (tui/chat/host.py: each engine on its own thread and loop);
- one turn end to end: the requests (the slot's recent messages and the prompt), each
  answer streamed by its host into a :class:`~tui.core.live.LiveRequest` (stamped where
  it happens), its final metrics, its session record, cancel, and a failure that keeps
  the partial answer;
- how an A/B turn runs (tui/engines/placement.py: in turn, order alternating, when A and
  B share hardware; at once otherwise);
- the history windows the sparklines read (one value per finished answer), the last
  metrics per slot, and an engine's KV state from its stream's ContextFill.

Every answer that was sent is published, once it ended, as one
:class:`~tui.core.outcome.RequestOutcome` to the core's :attr:`ChatCore.outcomes`
(``source`` "chat" for the TUI, "run" for ``infertop run``; the client is infertop
itself): the front end adds its sinks (the ledger) to it and closes it.

It runs on its caller's event loop and tells one listener what happened
(tui/chat/events.py); engines run on their hosts' threads, where events are only stamped
and stored. A ``tap`` may see every stream event as it is added (in the engine's thread:
``infertop run`` echoes text from there).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable

from tui.chat.events import (
    AnswerEnded,
    AnswerWaiting,
    ChatEvent,
    EngineStateChanged,
    Notice,
    TurnEnded,
)
from tui.chat.host import ERROR, GENERATING, READY, EngineHost, HostState
from tui.config import Config
from tui.core.cancel import CancelToken
from tui.core.events import ContextFill, Failed, StreamEvent
from tui.core.kv import KvLayout, KvState, state_from_fill
from tui.core.live import LiveRequest
from tui.core.metrics import RequestMetrics, compute_metrics
from tui.core.outcome import INFERTOP_ITSELF, Outcomes, Source, Where, outcome_of, timeline_state
from tui.core.pauses import defer_full_collections, resume_full_collections
from tui.core.session import SessionRecorder, session_record
from tui.core.trace_context import TraceMode, continue_or_start
from tui.core.verdict import Seen, Verdict, judge
from tui.core.window import RollingWindow
from tui.engines.base import EngineError, EngineInfo, EngineSpec, GenerationRequest
from tui.engines.placement import CONCURRENT, ABPlan, ab_plan, turn_order

SLOTS = ("A", "B")
HISTORY_MESSAGES = 8  # multi-turn context kept per slot (user + assistant messages)
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


class ChatCore:
    """See the module docstring. ``host_spec`` turns a configured spec into the one the
    engine runs with (the TUI's thread choice: tui/engines/placement.py)."""

    def __init__(
        self,
        config: Config,
        on_event: Callable[[ChatEvent], object],
        *,
        initial: str | None = None,
        recorder: SessionRecorder | None = None,
        host_spec: Callable[[EngineSpec], EngineSpec] = lambda spec: spec,
        tap: Callable[[str, StreamEvent], None] | None = None,
        outcomes: Outcomes | None = None,
        source: Source = "chat",
    ) -> None:
        self.config = config
        self.outcomes = outcomes if outcomes is not None else Outcomes()
        self.source: Source = source
        # each request's trace context (tui/core/trace_context.py): "record" gives its
        # span ids, "propagate" also sends them as traceparent; and, where the user asked
        # to capture content, what gets each answer's messages before its outcome goes out
        self.trace: TraceMode = "off"
        self.content_tap: Callable[[str, list[dict[str, str]], str, str | None], None] | None = None
        self._emit = on_event
        self.recorder = recorder
        self._host_spec = host_spec
        self._tap = tap
        names = list(config.engines)
        first = initial if initial in config.engines else config.default_engine
        self.slot_engine: dict[str, str | None] = {"A": first, "B": next_name(names, first)}
        self.hosts: dict[str, EngineHost] = {}
        self.ab = False
        self.busy = False
        self.turn_no = 0
        self.live: dict[str, LiveRequest | None] = {"A": None, "B": None}
        self.cancels: dict[str, CancelToken] = {}
        self.messages: dict[str, list[dict[str, str]]] = {"A": [], "B": []}
        self.history: dict[str, dict[str, RollingWindow]] = {s: windows() for s in SLOTS}
        self.last_metrics: dict[str, RequestMetrics | None] = {"A": None, "B": None}
        self.last_verdict: dict[str, Verdict | None] = {"A": None, "B": None}
        self._load_locks: dict[str, asyncio.Lock] = {}
        self._record_error_shown = False

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

    # -- a turn ---------------------------------------------------------------------
    def request(self, slot: str, prompt: str) -> GenerationRequest:
        """The slot's next request: its recent messages, then ``prompt``."""
        g = self.config.generation
        messages = self.messages[slot][-HISTORY_MESSAGES:] + [{"role": "user", "content": prompt}]
        return GenerationRequest(
            messages=messages,
            max_tokens=g.max_tokens,
            temperature=g.temperature,
            top_p=g.top_p,
            seed=g.seed,
        )

    def start_turn(
        self, prompt: str, requests: dict[str, GenerationRequest] | None = None
    ) -> dict[str, GenerationRequest]:
        """Begin a turn for ``prompt`` (both slots in A/B mode): the requests it will
        send (``requests``: the caller's own, e.g. run's); then :meth:`run_turn`."""
        if not prompt.strip():
            raise Refused("the prompt is empty — type something first")
        if self.busy:
            raise Refused("still answering — wait, or press Esc to cancel")
        self.busy = True
        defer_full_collections()  # until the turn ends (see tui/core/pauses.py)
        self.turn_no += 1
        requests = requests or {slot: self.request(slot, prompt) for slot in self.slots()}
        self.cancels = {slot: CancelToken() for slot in requests}  # Esc from now on
        return requests

    async def run_turn(self, requests: dict[str, GenerationRequest]) -> dict[str, RequestMetrics]:
        """Every answer of the turn :meth:`start_turn` began, as the A/B plan says."""
        turn = self.turn_no
        results: dict[str, RequestMetrics] = {}
        plan = self.ab_plan() if len(requests) > 1 else None
        try:
            if plan is not None and plan.schedule == CONCURRENT:
                out = await asyncio.gather(*(self._answer(s, r) for s, r in requests.items()))
                results = dict(zip(requests, out, strict=True))
            else:
                order = turn_order(turn, tuple(requests)) if plan is not None else list(requests)
                for k, slot in enumerate(order):
                    if plan is not None:
                        for later in order[k + 1 :]:
                            rid = requests[later].request_id
                            self._emit(AnswerWaiting(later, rid, slot, plan))
                    results[slot] = await self._answer(slot, requests[slot])
        finally:
            self.cancels.clear()
            self.busy = False
            resume_full_collections()
            self._emit(TurnEnded(turn, results, plan))
        return results

    async def _answer(self, slot: str, request: GenerationRequest) -> RequestMetrics:
        name = self.engine_of(slot)
        live = LiveRequest(request.request_id)  # a front end reads it when it draws
        self.live[slot] = live
        add = live.add if self._tap is None else _tapped(live.add, slot, self._tap)
        cancel = self.cancels.setdefault(slot, CancelToken())
        if self.trace != "off" and request.trace is None:
            request.trace = continue_or_start(None)
            request.send_traceparent = self.trace == "propagate"
        host = await self.ensure_loaded(slot)
        if host is None:
            why = f"engine {name} is not available: {self.host(name).error}"
            add(Failed(time.perf_counter_ns(), why, "load"))
        elif cancel.cancelled:
            add(Failed(time.perf_counter_ns(), "cancelled before it started", "cancelled"))
        else:
            self._emit(EngineStateChanged(slot, name, "generating"))
            try:
                await host.stream(request, cancel, add)
            except EngineError as e:
                add(Failed(time.perf_counter_ns(), str(e), "engine"))
            state: HostState = ERROR if host.state == ERROR else READY
            self._emit(EngineStateChanged(slot, name, state, host.error or ""))
        metrics = compute_metrics(live.timeline)
        if self.content_tap is not None:
            tl = live.timeline
            self.content_tap(request.request_id, request.messages, tl.text, tl.finish_reason)
        verdict = self.verdict(name, live, metrics)
        self.last_verdict[slot] = verdict
        self._publish(name, request, live, metrics, verdict)
        self._remember(slot, request, live, metrics)
        await self._record(slot, name, request, live, metrics)
        self._emit(AnswerEnded(slot, live, metrics, verdict))
        return metrics

    def verdict(self, name: str, live: LiveRequest, metrics: RequestMetrics) -> Verdict:
        """Why the answer took its time (tui/core/verdict.py): the chat sends one request
        to an engine at a time, so none of its own was ahead of it; the engine's slots
        from what it reported at load (llama-server's /props)."""
        info = self.info(name)
        slots = info.parameters.get("total_slots") if info is not None else None
        seen = Seen(
            others_at_send=0,
            others_max=0,
            slots_total=slots if isinstance(slots, int) and not isinstance(slots, bool) else None,
        )
        tl = live.timeline
        return judge(metrics, tl.truth, seen, timeline_state(tl))

    def _remember(
        self, slot: str, request: GenerationRequest, live: LiveRequest, m: RequestMetrics
    ) -> None:
        """The answer joins the slot's messages (the next turn's context) and, when it
        has a first token, the history windows."""
        if live.timeline.text:
            prompt = request.messages[-1].get("content", "") if request.messages else ""
            self.messages[slot] += [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": live.timeline.text},
            ]
        self.push_history(slot, m)

    def _publish(
        self,
        name: str,
        request: GenerationRequest,
        live: LiveRequest,
        m: RequestMetrics,
        verdict: Verdict | None = None,
    ) -> None:
        """The answer's outcome to :attr:`outcomes` (nothing when it was never sent)."""
        host = self.hosts.get(name)
        info = self.info(name)
        model = info.model if info is not None else None
        engine = host.engine if host is not None else None
        if engine is not None:
            where = engine.where(model)
        else:
            spec = self.config.engines[name]
            where = Where(
                spec.kind, spec.kind, spec.url or "in-process", model or spec.model, spec.kind
            )
        outcome = outcome_of(
            request.request_id,
            self.source,
            where,
            INFERTOP_ITSELF,
            live.timeline,
            m,
            trace=request.trace,
            verdict=verdict,
        )
        if outcome is not None:
            self.outcomes.publish(outcome)

    def push_history(self, slot: str, m: RequestMetrics) -> None:
        """An answer's metrics into the slot's windows (answers with no first token
        have none to give)."""
        if m.ttft_ms is None:
            return
        self.last_metrics[slot] = m
        w = self.history[slot]
        w["ttft"].push(m.ttft_ms)
        for key, value in (("itl", m.itl_ms_p50), ("decode", m.decode_tps)):
            if value is not None:
                w[key].push(value)
        if m.prefill_tps is not None:
            w["prefill"].push(m.prefill_tps)

    async def _record(
        self,
        slot: str,
        name: str,
        request: GenerationRequest,
        live: LiveRequest,
        metrics: RequestMetrics,
    ) -> None:
        if self.recorder is None:
            return
        spec = self.config.engines[name]
        info = self.info(name)
        rec = session_record(
            engine=name,
            kind=spec.kind,
            model=info.model if info else str(spec.model),
            messages=request.messages,
            params=request.params(),
            timeline=live.timeline,
            metrics=metrics,
            request_id=request.request_id,
            slot=slot,
        )
        try:
            await asyncio.to_thread(self.recorder.append, rec)
        except OSError as e:
            if not self._record_error_shown:
                self._record_error_shown = True
                why = f"session log not written ({self.recorder.path}): {e.strerror}"
                self._emit(Notice(why, "error"))

    def cancel(self) -> bool:
        """Cancel the answers in flight; False when nothing streams."""
        if not self.busy:
            return False
        for token in self.cancels.values():
            token.cancel()
        return True

    def clear(self) -> None:
        """Forget the conversation (each slot's messages)."""
        if self.busy:
            raise Refused("an answer is still streaming — Esc cancels it first")
        for slot in SLOTS:
            self.messages[slot] = []


def _tapped(
    add: Callable[[StreamEvent], None], slot: str, tap: Callable[[str, StreamEvent], None]
) -> Callable[[StreamEvent], None]:
    def both(event: StreamEvent) -> None:
        add(event)
        tap(slot, event)

    return both
