"""RequestOutcome: one finished request, as every place that measures hands it on.

The proxy (other clients' requests), the chat (the TUI and ``infertop run``) and the
bench each measure requests with core's definitions (:mod:`tui.core.metrics`). When a
request ends — done, failed or cancelled — its place builds one :class:`RequestOutcome`
and publishes it to an :class:`Outcomes` fan-out; what keeps or exports requests (the
ledger, OpenTelemetry spans, alert rules) is an :class:`OutcomeSink` added to it.

Numbers and names only: an outcome never holds a prompt, an answer, reasoning text, a
tool call's arguments or an API key. Every client-given string in it is bounded
(:func:`bounded`) before it is stored here; a sink that shows one on a terminal still
passes it through :func:`tui.core.safe_text.terminal_safe`.

``publish`` runs on the request's own path (the proxy's forwarding loop, the chat's UI
loop, a bench worker): a sink's ``publish`` must return at once — hand the outcome to
its own thread or queue, bounded, and drop (counting the drop) rather than block or grow.
A bounded sink also says how many more it takes before it drops (``room()``), so that
:meth:`Outcomes.publish_many` — many outcomes at once, off every request's path (a bench
level's, when it ends) — can wait for the sink to drain instead of losing a burst larger
than its queue.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from tui.core.events import EngineTruth
from tui.core.metrics import RequestMetrics
from tui.core.timeline import RequestTimeline
from tui.core.trace_context import TraceContext
from tui.core.verdict import Verdict

# Where a request was measured.
Source = Literal["proxy", "chat", "run", "bench"]
SOURCES: Final[tuple[Source, ...]] = ("proxy", "chat", "run", "bench")
# How it ended: answered to its end; ended by an error (the engine's, the network's, a
# bound's); stopped by its client or the user before its end.
OutcomeState = Literal["done", "failed", "cancelled"]
OUTCOME_STATES: Final[tuple[OutcomeState, ...]] = ("done", "failed", "cancelled")

# The longest client-given string an outcome keeps (a User-Agent, a `user` field, a name).
TEXT_BOUND: Final = 200

log = logging.getLogger(__name__)


def bounded(text: str | None, limit: int = TEXT_BOUND) -> str | None:
    """``text`` cut to ``limit`` characters (None stays None)."""
    if text is None:
        return None
    return text if len(text) <= limit else text[:limit]


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """Who sent a request, as far as infertop can honestly tell; every part optional.

    For the proxy: ``key_fingerprint`` is a keyed hash of the API key (a per-installation
    secret; never the key, not comparable across installations), ``name`` the name config
    gives that fingerprint (``[clients]``), ``user`` the body's OpenAI ``user`` or
    Anthropic ``metadata.user_id``, ``program`` the client program named from its
    User-Agent (or the raw User-Agent, bounded), ``process`` the local process that owns
    the client socket ("name[pid]"), looked up off the hot path, ``address`` the client's
    IP address (no port: a connection's port names no client). For the chat and bench:
    :data:`INFERTOP_ITSELF`.
    """

    key_fingerprint: str | None = None
    name: str | None = None
    user: str | None = None
    program: str | None = None
    process: str | None = None
    address: str | None = None

    @property
    def label(self) -> str:
        """The one name a table shows: config's name, else the user, the fingerprint, the
        program, the process, the address, else "unknown"."""
        for part in (
            self.name,
            self.user,
            self.key_fingerprint,
            self.program,
            self.process,
            self.address,
        ):
            if part:
                return part
        return "unknown"


INFERTOP_ITSELF: Final = ClientIdentity(name="infertop", program="infertop")


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """One finished request (see the module docstring).

    ``t0_wall`` is the wall clock (epoch seconds) when the request was sent upstream (its
    ``RequestSent``), ``t0_ns`` / ``t_end_ns`` the same moment and the stream's end on
    ``time.perf_counter_ns``'s line (the stamps the metrics were computed from), so a
    sink can place the request on the wall clock (``t0_wall + (t_end_ns - t0_ns) / 1e9``)
    and find which requests overlapped. ``metrics`` is the request's
    :class:`~tui.core.metrics.RequestMetrics` (numbers; token counts carry their source),
    ``truth`` the engine's own account where it gave one.
    """

    id: str
    source: Source
    state: OutcomeState
    route: str  # "/v1/chat/completions", "/v1/messages", ... ; the engine's kind for in-process
    api: str  # the wire dialect: "openai-chat", "responses", "messages", "ollama", ...
    upstream: str  # the server's URL, or the engine's name for an in-process engine
    model: str | None
    client: ClientIdentity
    t0_wall: float
    t0_ns: int
    t_end_ns: int
    metrics: RequestMetrics
    truth: EngineTruth | None = None
    error_kind: str | None = None  # Failed.kind where state is "failed"
    trace_id: str | None = None  # the W3C trace id the request carried, where one did
    streamed: bool | None = None
    # infertop's span of the request in that trace, and the client's span it continues
    # (tui/core/trace_context.py); None where no trace context was made
    span_id: str | None = None
    parent_span_id: str | None = None
    kind: str | None = None  # the engine's kind ("llama-server", "vllm", ...), where known
    response_model: str | None = None  # the model the answer named, where it named one
    verdict: Verdict | None = None  # why it took its time (tui/core/verdict.py)

    @property
    def e2e_s(self) -> float:
        """Seconds from the request's send to the stream's end."""
        return (self.t_end_ns - self.t0_ns) / 1e9

    @property
    def t_end_wall(self) -> float:
        """The stream's end on the wall clock (epoch seconds), from the request's stamps."""
        return self.t0_wall + self.e2e_s


@dataclass(frozen=True, slots=True)
class Where:
    """Where a request went: its ``route`` (the path, or the engine's kind for an
    in-process engine), ``api`` (the wire dialect), ``upstream`` (the server's URL, or
    "in-process") and ``model``. An engine says its own (``Engine.where``)."""

    route: str
    api: str
    upstream: str
    model: str | None
    kind: str | None = None  # the engine's kind (gen_ai.provider.name: tui/otel)


def timeline_state(tl: RequestTimeline) -> OutcomeState:
    """How a finished timeline ended: cancelled (a Failed of kind "cancelled"), failed
    (any other error), else done."""
    if tl.error is None and tl.error_kind is None:
        return "done"
    return "cancelled" if tl.error_kind == "cancelled" else "failed"


def outcome_of(
    rid: str,
    source: Source,
    where: Where,
    client: ClientIdentity,
    tl: RequestTimeline,
    metrics: RequestMetrics,
    state: OutcomeState | None = None,
    streamed: bool | None = True,
    trace: TraceContext | None = None,
    verdict: Verdict | None = None,
) -> RequestOutcome | None:
    """The outcome of a request infertop sent itself (the chat, ``run``, the bench) from
    its timeline; None when it was never sent (an engine that did not load, a cancel
    before the start): no server saw it. ``state``: the caller's, else the timeline's.
    ``trace``: the request's trace context (``GenerationRequest.trace``), where it had
    one. ``response_model`` is the model the server's answer named (the timeline's, from
    its Finished or Failed), never the one asked for."""
    t0 = tl.t_sent_ns
    if t0 is None:
        return None
    t_end = tl.t_end_ns if tl.t_end_ns is not None else t0
    ended = state or timeline_state(tl)
    return RequestOutcome(
        id=rid,
        source=source,
        state=ended,
        route=where.route,
        api=where.api,
        upstream=where.upstream,
        model=bounded(where.model),
        client=client,
        t0_wall=wall_clock(t0),
        t0_ns=t0,
        t_end_ns=t_end,
        metrics=metrics,
        truth=tl.truth,
        error_kind=bounded(tl.error_kind, 40) if ended == "failed" else None,
        streamed=streamed,
        trace_id=trace.trace_id if trace is not None else None,
        span_id=trace.span_id if trace is not None else None,
        parent_span_id=trace.parent_id if trace is not None else None,
        kind=where.kind,
        response_model=tl.response_model,
        verdict=verdict,
    )


def wall_clock(t_ns: int) -> float:
    """A ``time.perf_counter_ns()`` stamp on the wall clock (epoch seconds): now's wall
    clock less how long ago the stamp was. Read once per stamp, at its request's end."""
    return time.time() - (time.perf_counter_ns() - t_ns) / 1e9


class OutcomeSink(Protocol):
    """What keeps or exports finished requests (the ledger, OTLP spans, alerts)."""

    def publish(self, outcome: RequestOutcome) -> None:
        """Take one outcome; return at once (see the module docstring)."""

    def close(self) -> None:
        """Flush what is pending within a bounded time, then stop."""


BURST_WAIT_S: Final = 30.0  # publish_many waits at most this long in all for room
ROOM_POLL_S: Final = 0.01


class Outcomes:
    """The fan-out every measuring place publishes to. A sink that raises is logged once
    and the others still get the outcome: keeping or exporting a request never fails the
    request."""

    def __init__(self) -> None:
        self._sinks: list[OutcomeSink] = []
        self._lock = threading.Lock()
        self._failed: set[int] = set()

    def add(self, sink: OutcomeSink) -> None:
        with self._lock:
            self._sinks = [*self._sinks, sink]

    def publish(self, outcome: RequestOutcome) -> None:
        for sink in self._sinks:  # a copy-on-write list: no lock on the request's path
            try:
                sink.publish(outcome)
            except Exception:
                if id(sink) not in self._failed:
                    self._failed.add(id(sink))
                    log.exception("an outcome sink failed: %r", sink)

    def publish_many(self, outcomes: list[RequestOutcome], wait_s: float = BURST_WAIT_S) -> None:
        """Many outcomes at once, off every request's path (a bench level's, at its end):
        before each, while a bounded sink has no room (``room()`` ≤ 0), wait — ``wait_s``
        in all at most — for it to drain, so a burst larger than its queue is kept, not
        dropped. A sink that stays full past that (a stalled disk, a hung collector)
        drops and counts, as :meth:`publish` would."""
        deadline = time.monotonic() + wait_s
        for outcome in outcomes:
            while self._full() and time.monotonic() < deadline:
                time.sleep(ROOM_POLL_S)
            self.publish(outcome)

    def _full(self) -> bool:
        for sink in self._sinks:
            room = getattr(sink, "room", None)
            try:
                if callable(room) and room() <= 0:
                    return True
            except Exception:  # noqa: BLE001 - a sink that cannot say is not waited for
                continue
        return False

    def close(self) -> None:
        with self._lock:
            sinks, self._sinks = self._sinks, []
        for sink in sinks:
            try:
                sink.close()
            except Exception:
                log.exception("an outcome sink failed to close: %r", sink)
