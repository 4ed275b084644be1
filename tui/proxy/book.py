"""RequestBook: the requests in flight and the recent ones, and who hears about them.

When a generation request starts, ends or every :data:`TICK_S` while any watcher is
attached, the book writes one JSON line to each watcher (``/infertop/events``):

- ``{"event": "hello", "proxy": {...}, "rows": [...], "totals": {...}}`` on attaching;
- ``{"event": "start", "row": {...}}`` — a request began (a :class:`RequestRow`);
- ``{"event": "tick", "rows": [...], "totals": {...}}`` — the rows in flight, live;
- ``{"event": "end", "row": {...}, "metrics": {...}, "totals": {...}}`` — its final
  row and metrics (:class:`~tui.core.metrics.RequestMetrics` without the ITL lists).

``totals``: requests started, ended, failed, cancelled, other (not generation) requests
and ``output_tokens`` (ended requests' counts plus those in flight so far): a watcher's
aggregate tok/s is its growth between ticks. No line holds any text of a request.

Bounds: the :data:`KEEP` most recent requests are kept as rows; of those, the newest
:data:`KEEP_TIMELINE` keep their timelines and the newest :data:`KEEP_TEXT` their text
(request body and answer), for the view to show on request. A watcher whose unread
lines pass :data:`WATCHER_BUFFER` bytes is dropped (it reattaches and gets a fresh hello).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from tui.core.outcome import Outcomes
from tui.engines.dialects.vllm_request import SOURCE as PER_REQUEST
from tui.proxy.events_file import EventsWriter
from tui.proxy.exposition import ProxyMetrics
from tui.proxy.observe_queue import ObserveQueue
from tui.proxy.record import ProxiedRequest
from tui.proxy.rows import RequestState
from tui.proxy.truth import ScrapedTruth
from tui.proxy.why import ProxyWhy

try:
    from orjson import dumps as _dumps

    def json_line(obj: Any) -> bytes:
        return _dumps(obj) + b"\n"

except ImportError:  # pragma: no cover - a dependency
    import json

    def json_line(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


class WatchEvent(str, Enum):
    """The kinds of line on the live stream (see the module docstring): the ``event``
    field's value."""

    HELLO = "hello"
    START = "start"
    TICK = "tick"
    END = "end"


KEEP = 500
KEEP_TIMELINE = 256
KEEP_TEXT = 64
TICK_S = 0.5
WATCHER_BUFFER = 4 * 1024 * 1024


class Watcher(Protocol):
    """An attached watcher: ``send`` returns False once it is gone (or dropped)."""

    def send(self, line: bytes) -> bool: ...


@dataclass(eq=False)
class Departure:
    """A generation request between its departure and its record (see :meth:`depart`)."""

    before: Any  # the idle vLLM scrape to compare it against (tui/proxy/truth.py)
    alone: bool = True


class RequestBook:
    """In flight, recent, counts, watchers (see the module docstring)."""

    def __init__(
        self,
        metrics: ProxyMetrics,
        engine: str,
        events: EventsWriter | None = None,
        truth: ScrapedTruth | None = None,
        info: dict[str, Any] | None = None,
        outcomes: Outcomes | None = None,
    ) -> None:
        self.metrics = metrics
        self.engine = engine  # the upstream's name in records ("llama-server@host:port")
        # every finished generation request is published here (tui/core/outcome.py)
        self.outcomes = outcomes if outcomes is not None else Outcomes()
        self.events = events
        self.truth = truth
        self.info = info or {}
        self.in_flight: dict[str, ProxiedRequest] = {}
        self.departing: list[Departure] = []
        self.recent: deque[ProxiedRequest] = deque()
        self.watchers: list[Watcher] = []
        self.run = os.urandom(3).hex()  # ids stay unique across restarts of the proxy
        self.seq = 0
        self.starts = 0
        self.ended = self.failed = self.cancelled = self.others = 0
        self.tokens_ended = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.on_end: Callable[[ProxiedRequest], None] | None = None  # (--log)
        self.reads = ObserveQueue()  # reads forwarded, to observe (tui/proxy/observe_queue.py)
        self.why: ProxyWhy | None = None  # verdicts, sessions, the engine's inside (why.py)

    def settle(self) -> None:
        """Observe the reads waiting (and the steps queued behind them): the one place
        the queue is run from, before records are read or booked, so a row in flight is
        as current as its bytes."""
        self.reads.run()

    def next_id(self) -> str:
        self.seq += 1
        return f"{self.run}-{self.seq}"

    def find(self, rid: str) -> ProxiedRequest | None:
        self.settle()
        rec = self.in_flight.get(rid)
        if rec is not None:
            return rec
        return next((r for r in self.recent if r.id == rid), None)

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def active(self) -> int:
        """Generation requests on their way upstream or passing through."""
        return len(self.in_flight) + len(self.departing)

    def depart(self) -> Departure:
        """A generation request is about to be sent upstream (its record comes after:
        :meth:`start`). Counted now, so vLLM's /metrics is never read while it runs."""
        busy = self.active > 0
        d = Departure(None if busy or self.truth is None else self.truth.before(), not busy)
        if busy:
            for rec in self.in_flight.values():
                rec.alone = False
            for other in self.departing:
                other.alone = False
        self.departing.append(d)
        self.starts += 1
        return d

    def start(self, rec: ProxiedRequest, departure: Departure | None = None) -> None:
        """Its record, once it was sent (or could not be: then it departs now)."""
        d = departure if departure is not None else self.depart()
        if d in self.departing:
            self.departing.remove(d)
        rec.truth_before, rec.alone = d.before, d.alone
        self.in_flight[rec.id] = rec
        self.metrics.in_flight += 1
        self.metrics.generation_started(rec.model, rec.path)
        if self.watchers:
            self.publish({"event": WatchEvent.START, "row": rec.row().to_json()})

    def end(self, rec: ProxiedRequest) -> None:
        """It ended (done, failed or cancelled): its reads and its last word observed
        first (a record the exchange left unended is failed as internal), counted now;
        its record is finished here, or once vLLM's account of it is read
        (:mod:`tui.proxy.truth`)."""
        self.settle()
        if not rec.ended:
            rec.fail("the proxy could not finish this request", "internal")
        if self.in_flight.pop(rec.id, None) is None:
            return
        self.metrics.in_flight -= 1
        truth = self.truth
        before = rec.truth_before
        # vLLM reported this request itself (per-request metrics): nothing to read after it
        own = rec.timeline.truth is not None and rec.timeline.truth.source == PER_REQUEST
        alone = rec.alone and before is not None and rec.state == RequestState.DONE
        if truth is not None and alone and not own:
            task = asyncio.get_running_loop().create_task(self._with_truth(rec, before))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return
        if truth is not None and not own:
            rec.truth_note = (
                "other requests overlapped it" if not rec.alone else "no idle scrape before it"
            )
        self._finish(rec)
        if truth is not None and not self.active and truth.last_starts != self.starts:
            task = asyncio.get_running_loop().create_task(truth.refresh())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _with_truth(self, rec: ProxiedRequest, before: Any) -> None:
        assert self.truth is not None
        try:
            found, why = await self.truth.after(before)
        except Exception as e:  # noqa: BLE001 - a report missing is no reason to lose a row
            found, why = None, f"{type(e).__name__}: {e}"
        if found is not None:
            rec.set_truth(found)
        else:
            rec.truth_note = why
        self._finish(rec)

    def _finish(self, rec: ProxiedRequest) -> None:
        m = rec.finalize()
        rec.observer = None  # its reads are all in: no cycle left for the collector
        verdict = self.why.finish(rec, self) if self.why is not None else None
        if verdict is not None:
            self.metrics.verdict_given(verdict.kind)
        self.ended += 1
        if rec.state == RequestState.FAILED:
            self.failed += 1
        elif rec.state == RequestState.CANCELLED:
            self.cancelled += 1
        self.tokens_ended += m.output_tokens or 0
        outcome = rec.outcome(str(self.info.get("upstream") or self.engine), self.metrics.kind)
        self.metrics.generation_ended(
            rec.model, rec.path, rec.state, rec.stream is not False, m, outcome.client.label
        )
        self._keep(rec)
        why = None if verdict is None else verdict.to_dict()
        if self.events is not None:
            self.events.put({**rec.summary(self.engine, self.metrics.kind), "verdict": why})
        self.outcomes.publish(dataclasses.replace(outcome, verdict=verdict))
        if self.watchers:
            self.publish(
                {
                    "event": WatchEvent.END,
                    "row": rec.row().to_json(),
                    "metrics": m.to_dict(with_lists=False),
                    "verdict": why,
                    "totals": self.totals(),
                }
            )
        if self.on_end is not None:
            self.on_end(rec)

    def _keep(self, rec: ProxiedRequest) -> None:
        recent = self.recent
        recent.append(rec)
        n = len(recent)
        if n > KEEP_TEXT:
            recent[n - 1 - KEEP_TEXT].forget_text()
        if n > KEEP_TIMELINE:
            recent[n - 1 - KEEP_TIMELINE].forget_timeline()
        if n > KEEP:
            recent.popleft()

    def other(self, path: str, failed: bool = False, cancelled: bool = False) -> None:
        """A request that is not generation was forwarded."""
        self.others += 1
        self.metrics.other_request(path, failed, cancelled)

    # -- watchers -------------------------------------------------------------------------
    def totals(self) -> dict[str, int]:
        self.settle()
        live = sum(r.tokens for r in self.in_flight.values())
        return {
            "started": self.starts,
            "ended": self.ended,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "other": self.others,
            "output_tokens": self.tokens_ended + live,
        }

    def hello(self) -> bytes:
        self.settle()
        now = time.perf_counter_ns()
        rows = [r.row(now).to_json() for r in self.recent]
        rows += [r.row(now).to_json() for r in self.in_flight.values()]
        extras = self.why.extras() if self.why is not None else {}
        return json_line(
            {
                "event": WatchEvent.HELLO,
                "proxy": self.info,
                "rows": rows,
                "totals": self.totals(),
                **extras,
            }
        )

    def attach(self, watcher: Watcher) -> None:
        self.watchers.append(watcher)

    def publish(self, obj: dict[str, Any]) -> None:
        line = json_line(obj)
        gone = [w for w in self.watchers if not w.send(line)]
        for w in gone:
            self.watchers.remove(w)

    def tick(self) -> None:
        """The rows in flight, live, to every watcher (a heartbeat when none)."""
        if not self.watchers:
            return
        self.settle()
        now = time.perf_counter_ns()
        rows = [r.row(now).to_json() for r in self.in_flight.values()]
        extras = self.why.extras() if self.why is not None else {}
        self.publish({"event": WatchEvent.TICK, "rows": rows, "totals": self.totals(), **extras})
