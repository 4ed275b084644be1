"""settle_heap: a full collection now, survivors frozen, earlier frozen garbage freed."""

from __future__ import annotations

import gc
import weakref

from tui.app.heap import settle_heap


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic GC frees it


def test_settle_heap_collects_cycles_and_freezes_survivors():
    try:
        kept = Node()
        dropped = Node()
        gone = weakref.ref(dropped)
        del dropped
        settle_heap()
        assert gone() is None  # the cycle was collected
        assert gc.get_freeze_count() > 0  # survivors (kept among them) are frozen
        # frozen last time, garbage now: the next settle still frees it (unfreeze first)
        was = weakref.ref(kept)
        del kept
        settle_heap()
        assert was() is None
    finally:
        gc.unfreeze()
