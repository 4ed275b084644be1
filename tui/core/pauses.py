"""Keep the interpreter's own pauses out of measured streams: garbage collection and the
GIL hand-over. Shared by the TUI and the headless bench (whose reports are the numbers
people publish), so both measure under the same rules.

The GIL: a thread woken by arriving bytes or a produced token must take the GIL from
whatever thread holds it; CPython hands it over after the switch interval (5 ms by
default), which would land in measured ITL. :func:`short_gil_switches` sets 0.2 ms while
measuring.

Garbage collection:

A full (generation-2) collection scans every tracked object and holds the GIL while it
does: with Textual's widget tree that is 20–110 ms here, and the HTTP reader thread
cannot stamp the bytes that arrive meanwhile (one measured ITL gap grows by the pause,
the next shrinks). ``settle_heap()`` runs between requests: a full collection now, then
``gc.freeze()`` moves the survivors to the permanent generation, so the collections
that run during the next stream scan only what was allocated since. ``gc.unfreeze()``
first, so objects frozen last time that have become garbage are still collected.

The headless proxy (``infertop proxy``) settles its heap once, before it serves: a
full collection there scanned every object of its start-up (~29k) and held every stream
passing through for 8-25 ms, collecting nothing (benchmarks/proxy_overhead.py, 64
streams: p99 of added TTFT +17 ms before, +7.5 after; with the proxy's request cycles
also gone, tests/proxy/test_heap.py).

While a request streams, :func:`defer_full_collections` also stops CPython from starting
a full collection on its own (its generation-2 threshold is set out of reach; young
collections, ~1 ms, go on): measured in benchmarks/ui_itl_under_load.py, those came
every second or two mid-stream and held the GIL 4–27 ms, long enough for two 10 ms tokens
to wait in the socket together, where the kernel merges them and keeps the later stamp.
:func:`resume_full_collections` restores the threshold when the stream ends.

After the measuring, :func:`collector_paused` keeps the collector out of building the
report: it makes an object per chunk stamp (131k lists for 512 requests of 256 tokens),
and the collections those allocations set off scanned the bench's records again and again
(0.16 s of CPU to build the chunk lists that take 0.02 s on their own). The report holds no
reference cycles, so nothing is left for the collector afterwards.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Iterator

GIL_SWITCH_INTERVAL_S = 0.0002
_FAR = 1 << 30  # generation-1 collections before a full one: never, in practice
_deferred: tuple[int, int, int] | None = None  # the thresholds to restore


def settle_heap() -> float:
    """Collect everything and freeze the survivors; returns the milliseconds it took."""
    t0 = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return (time.perf_counter() - t0) * 1000.0


def defer_full_collections() -> None:
    """No automatic full collection until :func:`resume_full_collections`."""
    global _deferred
    if _deferred is None:
        _deferred = gc.get_threshold()
        gc.set_threshold(_deferred[0], _deferred[1], _FAR)


def resume_full_collections() -> None:
    """Restore the thresholds :func:`defer_full_collections` changed (idempotent)."""
    global _deferred
    if _deferred is not None:
        gc.set_threshold(*_deferred)
        _deferred = None


@contextlib.contextmanager
def short_gil_switches() -> Iterator[None]:
    """The GIL switch interval at :data:`GIL_SWITCH_INTERVAL_S` inside the block."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@contextlib.contextmanager
def streaming() -> Iterator[None]:
    """While requests stream: no automatic full collection (young ones go on)."""
    defer_full_collections()
    try:
        yield
    finally:
        resume_full_collections()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection inside the block (for building acyclic data in bulk); on
    leaving, everything is frozen (``gc.freeze()``) first, or the allocations counted
    meanwhile would set off collections that scan it all (twice: 50 ms for a bench report)
    as soon as the collector is back. :func:`settle_heap` unfreezes and collects it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
