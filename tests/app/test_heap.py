"""settle_heap: a full collection now, survivors frozen, earlier frozen garbage freed."""

from __future__ import annotations

import gc
import weakref

from tui.app.heap import defer_full_collections, resume_full_collections, settle_heap


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


def test_no_automatic_full_collection_while_deferred():
    generations: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            generations.append(info["generation"])

    before = gc.get_threshold()
    gc.callbacks.append(seen)
    try:
        defer_full_collections()
        defer_full_collections()  # idempotent: the original thresholds are kept
        junk = [Node() for _ in range(200_000)]  # many young collections, cycles promoted
        del junk
        assert 1 in generations and 2 not in generations
        resume_full_collections()
        assert gc.get_threshold() == before
        generations.clear()
        junk = [Node() for _ in range(200_000)]
        del junk
        gc.collect(1)
        assert gc.get_threshold() == before
    finally:
        gc.callbacks.remove(seen)
        resume_full_collections()
        gc.set_threshold(*before)
