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

The core is the turn itself; its engines and slots are its base
:class:`~tui.chat.slots.EngineSlots` (tui/chat/slots.py), what it keeps of each finished
answer (verdict, outcome, messages, history windows, session record) its base
:class:`~tui.chat.answer_keeping.AnswerKeeping` (tui/chat/answer_keeping.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tui.chat.answer_keeping import AnswerKeeping
from tui.chat.events import (
    AnswerEnded,
    AnswerWaiting,
    ChatEvent,
    EngineStateChanged,
    TurnEnded,
)
from tui.chat.host import ERROR, READY, EngineHost, HostState
from tui.chat.slots import SLOTS, Refused, next_name, windows
from tui.config import Config
from tui.core.cancel import CancelToken
from tui.core.events import Failed, StreamEvent
from tui.core.live import Disturbance, LiveRequest
from tui.core.metrics import RequestMetrics, compute_metrics
from tui.core.outcome import Outcomes, Source
from tui.core.pauses import defer_full_collections, resume_full_collections
from tui.core.session import SessionRecorder
from tui.core.trace_context import TraceMode, continue_or_start
from tui.core.verdict import Verdict
from tui.core.window import RollingWindow
from tui.engines.base import EngineError, EngineSpec, GenerationRequest
from tui.engines.placement import CONCURRENT, turn_order

# Refused is the slots' (tui/chat/slots.py), said here too: the front ends catch it as
# the core's
__all__ = ["HISTORY_MESSAGES", "ChatCore", "Refused"]

HISTORY_MESSAGES = 8  # multi-turn context kept per slot (user + assistant messages)


class ChatCore(AnswerKeeping):
    """See the module docstring. ``host_spec`` turns a configured spec into the one the
    engine runs with (the TUI's thread choice: tui/engines/placement.py); ``disturbance``
    what ran beside each answer, that it carries (tui/core/live.py: ``Disturbance``)."""

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
        disturbance: Disturbance | None = None,
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
        self._disturbance = disturbance
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
        live.mark_disturbed(self._disturbance)
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
