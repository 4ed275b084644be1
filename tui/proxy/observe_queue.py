"""Reads waiting to be observed: the proxy forwards each read at once and reads it later.

Forwarding a read and observing it (de-framing the events, parsing their JSON, feeding
the request's record) cost about the same; observing one read as it comes runs cold
(each time other code ran in between) and costs about twice what it costs warm. So a
read is queued here, stamped where its bytes arrived, and the queue is run — every read
in it, in arrival order — when:

- a request's body ends, is cut short or its client hangs up (its last reads first);
- something is about to read the records: the book's rows, totals and timelines
  (:meth:`~tui.proxy.book.RequestBook.settle`);
- the proxy's sweep comes round (every :data:`~tui.proxy.server.SWEEP_S` s), so a row
  in flight is at most that late;
- :data:`QUEUE_BYTES` of reads are waiting (memory stays bounded at any rate).

Timestamps are the reads' own, so when a read is observed changes no number; only how
current a row in flight is between sweeps.
"""

from __future__ import annotations

from collections.abc import Callable

QUEUE_BYTES = 1024 * 1024

Feed = Callable[[int, bytes], None]


class ObserveQueue:
    """Reads to observe later (see the module docstring)."""

    def __init__(self, limit: int = QUEUE_BYTES) -> None:
        self.items: list[tuple[Feed, int, bytes]] = []
        self.size = 0
        self.limit = limit

    def put(self, feed: Feed, t_ns: int, data: bytes) -> None:
        self.items.append((feed, t_ns, data))
        self.size += len(data)
        if self.size > self.limit:
            self.run()

    def run(self) -> None:
        """Observe every read waiting, in the order they came."""
        while self.items:  # (a feed never queues, but the loop holds if one did)
            items, self.items, self.size = self.items, [], 0
            for feed, t_ns, data in items:
                feed(t_ns, data)
