"""Load patterns: how requests are sent to one engine.

- :func:`run_sequential`: n requests, one after another.
- :func:`run_concurrency`: level c — c workers, each sends ``runs`` requests back to back,
  so c requests stay in flight for the whole level (c × runs requests).
- open-loop levels (requests on an arrival schedule): tui/bench/run/open_loop.py.

Every request goes through :class:`RequestDriver`, which stamps nothing itself: times come
from the engine's events (taken where tokens are produced / bytes arrive).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tui.bench.run import hooks
from tui.bench.run.prompts import Counter
from tui.bench.run.records import (
    LevelRun,
    RequestPhase,
    RequestRecord,
    classify,
)
from tui.core.cancel import CancelToken
from tui.core.metrics import compute_metrics
from tui.core.outcome import Where
from tui.core.timeline import RequestTimeline
from tui.core.trace_context import TraceMode, continue_or_start
from tui.engines.base import Engine, GenerationRequest, stream_guarded

if TYPE_CHECKING:
    from tui.bench.run.published import HeldOutcomes

MakeRequest = Callable[[int], GenerationRequest]
STOP_POLL_S = 0.05


class RequestDriver:
    """Sends requests to one engine and turns each stream into a :class:`RequestRecord`.

    ``stop`` (a threading.Event, so a signal handler or another thread may set it) stops
    new requests; :meth:`cancel_all` also cancels the ones in flight.
    """

    def __init__(
        self,
        engine: Engine,
        engine_name: str,
        t0_ns: int,
        stop: threading.Event,
        on_record: Callable[[RequestRecord], None] | None = None,
        held: HeldOutcomes | None = None,
    ) -> None:
        self.engine = engine
        self.engine_name = engine_name
        self.t0_ns = t0_ns
        self.stop = stop
        self.on_record = on_record
        # every request sent, calibration and warm-up too, is held here and published
        # with its verdict when its level ends (tui/bench/run/published.py)
        self.held = held
        self.where: Where | None = None
        self._active: set[CancelToken] = set()
        # request id -> (its cancel token, its timeline so far): open-loop levels watch
        # requests in flight (tui/bench/run/open_loop.py) and may cut one
        self._live: dict[str, tuple[CancelToken, RequestTimeline]] = {}
        self._lock = threading.Lock()  # cancel_all may be called from another thread
        self._next_index = 1  # prompt 0 is the calibration prompt
        # each request's trace context: "record" (OTLP export: its span's ids),
        # "propagate" (and sent as traceparent), "off" (none)
        self.trace: TraceMode = "off"

    @property
    def stopped(self) -> bool:
        return self.stop.is_set()

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet turned into a record."""
        with self._lock:
            return len(self._active)

    def next_index(self) -> int:
        """A new prompt number: every request of an engine gets a distinct prompt."""
        i = self._next_index
        self._next_index += 1
        return i

    def live(self) -> list[tuple[str, RequestTimeline]]:
        """The requests in flight now: (request id, its timeline as stamped so far)."""
        with self._lock:
            return [(rid, tl) for rid, (_c, tl) in self._live.items()]

    def cancel_request(self, request_id: str) -> bool:
        """Cancel one request in flight; False when it is not in flight."""
        with self._lock:
            entry = self._live.get(request_id)
        if entry is None:
            return False
        entry[0].cancel()
        return True

    def cancel_all(self) -> None:
        with self._lock:
            tokens = list(self._active)
        for token in tokens:
            token.cancel()

    async def run(
        self,
        request: GenerationRequest,
        phase: RequestPhase,
        level: str,
        index: int,
        *,
        concurrency: int | None = None,
        rate: float | None = None,
        load_ms: float | None = None,
        prompt_tokens_target: int | None = None,
        notify: bool = True,
        into: list[RequestRecord] | None = None,
    ) -> RequestRecord:
        """Send one request; the record is appended to ``into`` (before anyone is told)."""
        cancel = CancelToken()
        tl = RequestTimeline()
        if self.trace != "off" and request.trace is None:
            request.trace = continue_or_start(None)
            request.send_traceparent = self.trace == "propagate"
        with self._lock:
            self._active.add(cancel)
            self._live[request.request_id] = (cancel, tl)
        if self.stopped:
            cancel.cancel()
        t_call = time.perf_counter_ns()
        try:
            await stream_guarded(self.engine, request, cancel, tl.add)
        finally:
            with self._lock:
                self._active.discard(cancel)
                self._live.pop(request.request_id, None)
        status = classify(tl)
        if status == "failed" and cancel.cancelled:
            status = "cancelled"
        t_start = tl.t_sent_ns if tl.t_sent_ns is not None else t_call
        t_end = tl.t_end_ns if tl.t_end_ns is not None else time.perf_counter_ns()
        record = RequestRecord(
            engine=self.engine_name,
            phase=phase,
            level=level,
            index=index,
            request_id=request.request_id,
            t_start_s=(t_start - self.t0_ns) / 1e9,
            t_end_s=(t_end - self.t0_ns) / 1e9,
            timeline=tl,
            metrics=compute_metrics(tl),
            status=status,
            concurrency=concurrency,
            rate=rate,
            load_ms=load_ms,
            prompt_tokens_target=prompt_tokens_target or request.prompt_tokens_target,
            max_tokens=request.max_tokens,
            pre_send_wait_ms=None if tl.t_sent_ns is None else (tl.t_sent_ns - t_call) / 1e6,
            trace_id=None if request.trace is None else request.trace.trace_id,
            span_id=None if request.trace is None else request.trace.span_id,
        )
        if into is not None:
            into.append(record)
        if self.held is not None:
            self.publish(record)
        if notify and self.on_record is not None:
            self.on_record(record)
        return record

    def publish(self, record: RequestRecord) -> None:
        """A finished request to :attr:`held` (a worker process's record too: the runner
        hands those to its driver), published when its level ends."""
        if self.held is None:
            return
        if self.where is None:
            try:
                model = self.engine.info().model
            except Exception:  # noqa: BLE001 - a name is not worth failing a request
                model = None
            self.where = self.engine.where(model)
        self.held.hold(record, self.where)

    def level_ended(self) -> None:
        """The level (or calibration, warm-up, cold starts) ended: its requests get their
        verdicts and are published."""
        if self.held is not None:
            self.held.level_ended(self.engine_name)


async def run_sequential(
    driver: RequestDriver, n: int, make_request: MakeRequest, phase: RequestPhase, label: str
) -> list[RequestRecord]:
    out: list[RequestRecord] = []
    for _ in range(n):
        if driver.stopped:
            break
        i = driver.next_index()
        out.append(await driver.run(make_request(i), phase, label, i, concurrency=1))
    return out


async def run_concurrency(
    driver: RequestDriver,
    c: int,
    runs: int,
    make_request: MakeRequest,
    level: LevelRun | None = None,
    level_c: int | None = None,
) -> LevelRun:
    """Hold c requests in flight: c workers × ``runs`` requests each (records go into
    ``level``, a new one when None). Records say ``level_c`` (default c): a worker
    process holding its share of a level's streams says the level's c."""
    if level is None:
        level = LevelRun(driver.engine_name, f"c={c}", "concurrency", concurrency=c)
    said = c if level_c is None else level_c

    async def worker() -> None:
        for _ in range(runs):
            if driver.stopped:
                return
            i = driver.next_index()
            await driver.run(
                make_request(i), "warm", level.label, i, concurrency=said, into=level.records
            )

    await asyncio.gather(*(worker() for _ in range(c)))
    level.complete = not driver.stopped
    return level


TOKENIZER = "engine tokenizer"
USAGE_PROBE = "usage probe"


async def prompt_counter(
    engine: Engine, driver: RequestDriver, kept: list[RequestRecord]
) -> tuple[Counter, str]:
    """How the engine counts a request's prompt tokens: its tokenizer hook when it has
    one ("engine tokenizer"), else a 1-token request whose ``usage`` says so ("usage
    probe"; each probe's record is appended to ``kept``, None once the bench stops)."""
    if await hooks.count_prompt_tokens(engine, GenerationRequest.from_prompt("x")) is not None:

        async def by_tokenizer(req: GenerationRequest) -> int | None:
            return await hooks.count_prompt_tokens(engine, req)

        return by_tokenizer, TOKENIZER

    async def by_probe(req: GenerationRequest) -> int | None:
        if driver.stopped:
            return None
        req.max_tokens = 1
        rec = await driver.run(req, "calibrate", "calibrate", 0, notify=False)
        kept.append(rec)
        # A reasoning model's one token can be one the server keeps back (its <think>, a
        # newline its parser trims): no text, so the record is "failed", yet the server
        # finished and counted the prompt. A stream that errored or was cut counts nothing.
        finished = rec.timeline.finish_reason not in (None, "error", "cancelled")
        return rec.timeline.prompt_tokens if (rec.ok or finished) else None

    return by_probe, USAGE_PROBE
