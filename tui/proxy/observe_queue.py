"""Reads waiting to be observed: the proxy forwards each read at once and reads it later.

Forwarding a read and observing it (de-framing the events, parsing their JSON, feeding
the request's record) cost about the same; observing one read as it comes runs cold
(each time other code ran in between) and costs about twice what it costs warm. So a
read is queued here, stamped where its bytes arrived, and the queue is run — every read
in it, in arrival order — by its owner, the request book
(:meth:`~tui.proxy.book.RequestBook.settle`, the one place it is run from), when:

- a request ends (the book books it), is cut short or its client hangs up: the request's
  last word (its end, its failure) is queued behind its reads (:meth:`ObserveQueue.after`);
- something is about to read the records: the book's rows, totals and timelines;
- the proxy's sweep comes round (every :data:`~tui.proxy.server.SWEEP_S` s), so a row
  in flight is at most that late;

and by itself once :data:`QUEUE_BYTES` of reads are waiting (memory stays bounded at any
rate).

Timestamps are the reads' own, so when a read is observed changes no number; only how
current a row in flight is between sweeps.
"""

from __future__ import annotations

from collections.abc import Callable

QUEUE_BYTES = 1024 * 1024

Feed = Callable[[int, bytes], None]


class ObserveQueue:
    """Reads to observe later, and what follows them (see the module docstring)."""

    def __init__(self, limit: int = QUEUE_BYTES) -> None:
        self.items: list[tuple[Feed, int, bytes]] = []
        self.size = 0
        self.limit = limit

    def put(self, feed: Feed, t_ns: int, data: bytes) -> None:
        self.items.append((feed, t_ns, data))
        self.size += len(data)
        if self.size > self.limit:
            self.run()

    def after(self, step: Callable[[], None]) -> None:
        """``step()`` once every read queued before it has been observed (a request's
        end, after its last reads)."""
        self.items.append((_Step(step), 0, b""))

    def run(self) -> None:
        """Observe every read waiting, in the order they came."""
        while self.items:  # (a feed never queues, but the loop holds if one did)
            items, self.items, self.size = self.items, [], 0
            for feed, t_ns, data in items:
                feed(t_ns, data)


class _Step:
    """A step in the queue, called as a read's feed is (its stamp and bytes unused)."""

    __slots__ = ("step",)

    def __init__(self, step: Callable[[], None]) -> None:
        self.step = step

    def __call__(self, _t_ns: int, _data: bytes) -> None:
        self.step()
