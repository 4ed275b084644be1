"""Why each proxied request took its time: its verdict, its agent session, and the
engine's inside — the proxy's one hook for them (the book calls :meth:`ProxyWhy.finish`
as a request ends, and the server runs :meth:`ProxyWhy.run`).

- The verdict (tui/core/verdict.py) of each finished request, with what the proxy saw
  around it: how many other generation requests were in flight when it was sent and the
  most at once while it ran (from the book's requests in flight and recent ones), and
  the engine's slots (llama-server's /props ``total_slots``).
- Its session (tui/proxy/sessions.py): the body's messages hashed on a worker thread,
  the session filed back on the loop; the sessions ride on the watchers' ticks.
- The engine's inside (tui/engines/inside), read by the proxy itself at most once a
  second while someone watches, and only while no generation request passes through it
  (the rule its vLLM engine-truth reads follow, tui/proxy/truth.py): a read is never in
  front of a request the proxy is timing. The last read rides on every tick.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from tui.core.inside import EngineInside
from tui.core.outcome import OutcomeState
from tui.core.overlap import covering, most_at_once
from tui.core.verdict import Seen, Verdict, judge
from tui.engines.inside.reader import InsideReader, inside_kind
from tui.proxy.record import ProxiedRequest
from tui.proxy.rows import RequestState
from tui.proxy.sessions import Arrival, SessionBook, chain, messages_of


class RequestBook(Protocol):
    """What this module asks of the proxy's book (tui/proxy/book.py)."""

    @property
    def in_flight(self) -> Mapping[str, ProxiedRequest]: ...
    @property
    def recent(self) -> Iterable[ProxiedRequest]: ...
    @property
    def watchers(self) -> list[Any]: ...
    @property
    def active(self) -> int: ...
    def publish(self, obj: dict[str, Any]) -> None: ...


KEPT: Final = 500  # verdicts kept (as the book's rows)
READ_EVERY_S: Final = 1.0


def _decode_span(r: ProxiedRequest, now: int) -> tuple[int, int] | None:
    """First token → end (or now, still decoding) of a request; None before its first."""
    t0 = r.timeline.t_sent_ns
    first = r.counts.t_first
    if first is None and r.metrics is not None and r.metrics.ttft_ms is not None and t0:
        first = t0 + int(r.metrics.ttft_ms * 1e6)
    if first is None:
        return None
    end = r.timeline.t_end_ns
    return first, end if end is not None else now


def overlaps(rec: ProxiedRequest, book: RequestBook) -> tuple[int, int]:
    """(other requests in flight when ``rec`` was sent, the most decoding beside its own
    decode at once), from the requests in flight and the recent ones (newest first; a
    recent one that ended before ``rec`` was sent ends the walk: the older ended
    earlier still). See tui/core/overlap.py."""
    t0, t1 = rec.timeline.t_sent_ns, rec.timeline.t_end_ns
    if t0 is None:
        return 0, 0
    end = t1 if t1 is not None else t0
    others = [r for r in book.in_flight.values() if r is not rec]
    for r in reversed(list(book.recent)):
        if r is rec:
            continue
        e = r.timeline.t_end_ns
        if e is not None and e <= t0:
            break
        others.append(r)
    sends = []
    decodes = []
    for r in others:
        s = r.timeline.t_sent_ns
        if s is None or s > end:
            continue
        e = r.timeline.t_end_ns
        sends.append((s, e if e is not None else end + 1))
        d = _decode_span(r, end + 1)
        if d is not None:
            decodes.append(d)
    mine = _decode_span(rec, end)
    beside = most_at_once(decodes, *mine) if mine is not None else 0
    return covering(sends, t0), beside


class ProxyWhy:
    """Verdicts, sessions and the engine's inside for one proxy (module docstring)."""

    def __init__(self, kind: str, upstream: str, read_inside: bool = True) -> None:
        self.sessions = SessionBook()
        self.verdicts: OrderedDict[str, Verdict] = OrderedDict()
        self.session_of: OrderedDict[str, tuple[str, int]] = OrderedDict()
        ik = inside_kind(kind)
        self.reader = InsideReader(ik, upstream) if ik is not None and read_inside else None
        self.inside: EngineInside | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def slots_total(self) -> int | None:
        return self.reader.total_slots if self.reader is not None else None

    def finish(self, rec: ProxiedRequest, book: RequestBook) -> Verdict | None:
        """A request ended (its metrics final): its verdict now; its session once its
        messages are hashed (off the loop)."""
        m = rec.metrics
        if m is None:
            return None
        at_send, most = overlaps(rec, book)
        seen = Seen(others_at_send=at_send, others_max=most, slots_total=self.slots_total)
        state: OutcomeState = "done"
        if rec.state == RequestState.FAILED:
            state = "failed"
        elif rec.state == RequestState.CANCELLED:
            state = "cancelled"
        v = judge(m, rec.timeline.truth, seen, state)
        self.verdicts[rec.id] = v
        while len(self.verdicts) > KEPT:
            self.verdicts.popitem(last=False)
        if rec.body is not None and rec.state == RequestState.DONE:
            task = asyncio.get_running_loop().create_task(self._file(rec, rec.body, v, book))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return v

    async def _file(self, rec: ProxiedRequest, body: bytes, v: Verdict, book: RequestBook) -> None:
        def hashes() -> list[bytes]:
            messages = messages_of(body, rec.dialect)
            return chain(messages) if messages else []

        found = await asyncio.to_thread(hashes)
        tl = rec.timeline
        arrival = Arrival(
            rec.id, rec.client, rec.dialect, rec.model, found, tl.t_sent_ns, tl.t_end_ns, v
        )
        session = self.sessions.add(arrival)
        if session is None:
            return
        self.session_of[rec.id] = (session.id, session.turn_count)
        while len(self.session_of) > KEPT:
            self.session_of.popitem(last=False)

    def detail(self, rid: str) -> dict[str, Any]:
        """What the timeline view shows of a request besides its row: verdict, session."""
        v = self.verdicts.get(rid)
        out: dict[str, Any] = {"verdict": None if v is None else v.to_dict()}
        found = self.session_of.get(rid)
        if found is not None:
            s = self.sessions.sessions.get(found[0])
            out["session"] = None if s is None else {**s.to_dict(), "turn": found[1]}
        return out

    def extras(self) -> dict[str, Any]:
        """What rides on each tick and hello: the engine's inside, the sessions."""
        return {
            "inside": None if self.inside is None else self.inside.to_dict(),
            "sessions": self.sessions.summaries(),
        }

    async def run(self, book: RequestBook) -> None:
        """Read the engine's inside: once at the start (its slots), then every
        READ_EVERY_S while a watcher is attached — each only while the proxy is idle."""
        reader = self.reader
        if reader is None:
            return
        first = True
        while True:
            if (first or book.watchers) and book.active == 0 and reader.due():
                found = await asyncio.to_thread(reader.sample)
                self.inside = found
                first = False
            await asyncio.sleep(READ_EVERY_S)
