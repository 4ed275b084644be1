"""LiveRequest: a request in flight, shared by the engine thread and the UI; LiveCounts:
the running numbers of one stream, which the proxy's rows use too.

The engine side calls :meth:`LiveRequest.add` for every stamped event (from any thread).
The UI side calls :meth:`drain` to take the text that arrived since its last look, and
:meth:`snapshot` for live numbers. ``notify`` is called once per batch — only when the
previous batch has been drained — so a fast stream produces at most one pending UI
message at a time (updates are coalesced: a frame shows the latest state).

Live numbers (exact definitions; final metrics come from compute_metrics):
- ``tokens``: sum of engine-given per-chunk token counts (a chunk without one counts 1,
  and ``tokens_estimated`` becomes True).
- ``ttft_ms``: first content chunk (of any part) − request sent.
- ``ttfo_ms``: first chunk of answer text or of a tool call − request sent.
- ``reasoning_tokens``: the part of ``tokens`` that came in reasoning chunks (counted the
  same way); ``thinking``: the latest chunk was reasoning.
- ``last_itl_ms``: the latest gap between content chunks, divided by that chunk's tokens
  (a chunk the engine says carries 0 tokens adds no gap).
- ``itl_recent``: the last :data:`ITL_WINDOW` per-token gaps (a gap before a chunk of k
  tokens counts k times as gap/k); the live ITL p50 is their median.
- ``decode_tps``: (tokens − 1) / (t_last − t_first) once two content chunks arrived.
- ``context_fill``: the engine's latest count of tokens in its context (ContextFill).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from tui.core.events import (
    ANSWER,
    REASONING,
    ContextFill,
    Failed,
    Finished,
    Part,
    RequestSent,
    StreamEvent,
    TextChunk,
)
from tui.core.stats import percentile
from tui.core.timeline import RequestTimeline

# What ran beside a request from ``t0_ns`` to ``t1_ns`` that its numbers carry, or None
# (the background build's: tui/engines/files/build_state.py, ``BuildWatch.disturbance``).
Disturbance = Callable[[int, int], str | None]

ITL_WINDOW = 200  # per-token gaps kept for the live ITL view


class LiveCounts:
    """The running numbers of one stream's chunks (the module docstring defines each).
    Not thread-safe: its owner locks (LiveRequest) or runs on one thread (the proxy)."""

    __slots__ = (
        "tokens",
        "estimated",
        "reasoning_tokens",
        "t_first",
        "t_first_answer",
        "t_last",
        "last_itl_ms",
        "thinking",
        "itl",
    )

    def __init__(self) -> None:
        self.tokens = 0
        self.estimated = False
        self.reasoning_tokens = 0
        self.t_first: int | None = None
        self.t_first_answer: int | None = None
        self.t_last: int | None = None  # of the last chunk that carried tokens
        self.last_itl_ms: float | None = None
        self.thinking = False
        self.itl: deque[float] = deque(maxlen=ITL_WINDOW)

    def add(self, ev: TextChunk) -> None:
        """One chunk with text."""
        k = ev.tokens
        if k is None:
            self.estimated = True
            k = 1
        if k > 0:
            if self.t_last is not None:
                gap = (ev.t_ns - self.t_last) / 1e6 / k
                self.last_itl_ms = gap
                self.itl.extend([gap] * min(k, ITL_WINDOW))
            self.t_last = ev.t_ns
        if self.t_first is None:
            self.t_first = ev.t_ns
        self.tokens += k
        self.thinking = ev.part == REASONING
        if self.thinking:
            self.reasoning_tokens += k
        elif self.t_first_answer is None:
            self.t_first_answer = ev.t_ns

    def ttft_ms(self, t0: int | None) -> float | None:
        return None if t0 is None or self.t_first is None else (self.t_first - t0) / 1e6

    def ttfo_ms(self, t0: int | None) -> float | None:
        if t0 is None or self.t_first_answer is None:
            return None
        return (self.t_first_answer - t0) / 1e6

    def decode_tps(self) -> float | None:
        first, last = self.t_first, self.t_last
        if first is None or last is None or last <= first:
            return None
        return (self.tokens - 1) / ((last - first) / 1e9)

    def itl_p50_ms(self) -> float | None:
        return percentile(list(self.itl), 50) if self.itl else None


@dataclass(frozen=True)
class LiveSnapshot:
    tokens: int
    tokens_estimated: bool
    elapsed_ms: float
    ttft_ms: float | None
    last_itl_ms: float | None
    decode_tps: float | None
    done: bool
    itl_recent: list[float]
    context_fill: ContextFill | None = None
    ttfo_ms: float | None = None
    reasoning_tokens: int = 0
    thinking: bool = False


class LiveRequest:
    """Thread-safe accumulator for one streaming request (see the module docstring)."""

    def __init__(self, request_id: str, notify: Callable[[], object] | None = None) -> None:
        self.request_id = request_id
        self.timeline = RequestTimeline()
        self._notify = notify
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._pending_parts: list[Part] = []  # what each pending text is, once one is not
        self._notified = False
        self.counts = LiveCounts()
        self.done = False
        self.events = 0
        self.context_fill: ContextFill | None = None
        # set when it ended, by whoever knew: what ran beside it that its numbers carry
        # (the chat core's "a build was compiling"; tui/engines/files/build_state.py)
        self.disturbed: str | None = None

    def mark_disturbed(self, disturbance: Disturbance | None) -> None:
        """Set :attr:`disturbed` from what ran beside it from its send to its end (now,
        if it has not ended); unknown (None) without a disturbance or a send."""
        tl = self.timeline
        if disturbance is not None and tl.t_sent_ns is not None:
            self.disturbed = disturbance(tl.t_sent_ns, tl.t_end_ns or time.perf_counter_ns())

    def add(self, event: StreamEvent) -> None:
        with self._lock:
            self.timeline.add(event)
            self.events += 1
            if isinstance(event, TextChunk) and event.text:
                self.counts.add(event)
                part = event.part
                if self._pending_parts or part != ANSWER:
                    if not self._pending_parts:
                        self._pending_parts = [ANSWER] * len(self._pending)
                    self._pending_parts.append(part)
                self._pending.append(event.text)
            elif isinstance(event, (Finished, Failed)):
                self.done = True
            elif isinstance(event, ContextFill):
                self.context_fill = event
                return  # shown on the UI's timer, with the live numbers
            elif not isinstance(event, RequestSent):
                return  # usage / engine report: nothing for the UI to draw yet
            if self._notified or self._notify is None:
                return
            self._notified = True
        self._notify()

    def drain(self) -> str:
        """The text that arrived since the last drain, of every part; re-arms the
        notification."""
        return "".join(text for _, text in self.drain_parts())

    def drain_parts(self) -> list[tuple[Part, str]]:
        """The text that arrived since the last drain as (part, text) runs, in order,
        one run per change of part (:data:`~tui.core.events.PARTS`); re-arms the
        notification."""
        with self._lock:
            pending, parts = self._pending, self._pending_parts
            self._pending, self._pending_parts = [], []
            self._notified = False
        if not pending:
            return []
        if not parts:
            return [(ANSWER, "".join(pending))]
        runs: list[tuple[Part, str]] = []
        start = 0
        for i in range(1, len(parts) + 1):
            if i == len(parts) or parts[i] != parts[start]:
                runs.append((parts[start], "".join(pending[start:i])))
                start = i
        return runs

    def snapshot(self) -> LiveSnapshot:
        with self._lock:
            t0 = self.timeline.t_sent_ns
            now = self.timeline.t_end_ns or time.perf_counter_ns()
            c = self.counts
            return LiveSnapshot(
                tokens=c.tokens,
                tokens_estimated=c.estimated,
                elapsed_ms=0.0 if t0 is None else (now - t0) / 1e6,
                ttft_ms=c.ttft_ms(t0),
                last_itl_ms=c.last_itl_ms,
                decode_tps=c.decode_tps(),
                done=self.done,
                itl_recent=list(c.itl),
                context_fill=self.context_fill,
                ttfo_ms=c.ttfo_ms(t0),
                reasoning_tokens=c.reasoning_tokens,
                thinking=c.thinking and not self.done,
            )
