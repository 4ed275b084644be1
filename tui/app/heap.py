"""Keep CPython's full garbage collections out of streams.

A full (generation-2) collection scans every tracked object and holds the GIL while it
does: with Textual's widget tree that is 20–110 ms here, and the HTTP reader thread
cannot stamp the bytes that arrive meanwhile (one measured ITL gap grows by the pause,
the next shrinks). ``settle_heap()`` runs between requests: a full collection now, then
``gc.freeze()`` moves the survivors to the permanent generation, so the collections
that run during the next stream scan only what was allocated since. ``gc.unfreeze()``
first, so objects frozen last time that have become garbage are still collected.
"""

from __future__ import annotations

import gc
import time


def settle_heap() -> float:
    """Collect everything and freeze the survivors; returns the milliseconds it took."""
    t0 = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return (time.perf_counter() - t0) * 1000.0
