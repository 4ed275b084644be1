"""LiveRequest: a request in flight, shared by the engine thread and the UI.

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
- ``last_itl_ms``: the latest gap between content chunks, divided by that chunk's tokens.
- ``decode_tps``: (tokens − 1) / (t_last − t_first) once two content chunks arrived.
- ``context_fill``: the engine's latest count of tokens in its context (ContextFill).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tui.core.events import (
    ANSWER,
    REASONING,
    ContextFill,
    Failed,
    Finished,
    RequestSent,
    StreamEvent,
    TextChunk,
)
from tui.core.timeline import RequestTimeline
from tui.core.window import RollingWindow


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
        self._pending_parts: list[str] = []  # what each pending text is, once one is not
        self._t_first_answer: int | None = None
        self._reasoning_tokens = 0
        self._thinking = False
        self._notified = False
        self._tokens = 0
        self._estimated = False
        self._t_first: int | None = None
        self._t_last: int | None = None
        self._last_itl: float | None = None
        self.itl_window = RollingWindow(200)
        self.done = False
        self.events = 0
        self.context_fill: ContextFill | None = None

    def add(self, event: StreamEvent) -> None:
        with self._lock:
            self.timeline.add(event)
            self.events += 1
            if isinstance(event, TextChunk) and event.text:
                k = event.tokens if event.tokens is not None else 1
                if event.tokens is None:
                    self._estimated = True
                if self._t_last is not None and k > 0:
                    self._last_itl = (event.t_ns - self._t_last) / 1e6 / k
                    self.itl_window.push(self._last_itl)
                if self._t_first is None:
                    self._t_first = event.t_ns
                self._t_last = event.t_ns
                self._tokens += k
                part = event.part
                self._thinking = part == REASONING
                if self._thinking:
                    self._reasoning_tokens += k
                elif self._t_first_answer is None:
                    self._t_first_answer = event.t_ns
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

    def drain_parts(self) -> list[tuple[str, str]]:
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
        runs: list[tuple[str, str]] = []
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
            ttft = None
            if t0 is not None and self._t_first is not None:
                ttft = (self._t_first - t0) / 1e6
            tps = None
            if self._t_first is not None and self._t_last and self._t_last > self._t_first:
                tps = (self._tokens - 1) / ((self._t_last - self._t_first) / 1e9)
            ttfo = None
            if t0 is not None and self._t_first_answer is not None:
                ttfo = (self._t_first_answer - t0) / 1e6
            return LiveSnapshot(
                tokens=self._tokens,
                tokens_estimated=self._estimated,
                elapsed_ms=0.0 if t0 is None else (now - t0) / 1e6,
                ttft_ms=ttft,
                last_itl_ms=self._last_itl,
                decode_tps=tps,
                done=self.done,
                itl_recent=self.itl_window.snapshot(),
                context_fill=self.context_fill,
                ttfo_ms=ttfo,
                reasoning_tokens=self._reasoning_tokens,
                thinking=self._thinking and not self.done,
            )
