"""Handoff: every item from a producing thread reaches the consumer, in order, in batches."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from types import SimpleNamespace

import pytest

import tui.transport.handoff as handoff_module
from tests.support.virtual_time import VirtualClock, run_virtual
from tui.transport.handoff import REST_S, Handoff

END = object()


async def consume(handoff: Handoff) -> tuple[list[object], list[int], list[float]]:
    """(items, batch sizes, seconds from each item's put to its batch being seen)."""
    items: list[object] = []
    sizes: list[int] = []
    lags: list[float] = []
    async for batch in handoff.batches():
        now = time.perf_counter()
        sizes.append(len(batch))
        for item in batch:
            if item is END:
                return items, sizes, lags
            items.append(item[0])
            lags.append(now - item[1])
    raise AssertionError("unreachable")


def produce(handoff: Handoff, n: int, gap_s: float | None, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(n):
        if gap_s is None:
            if rng.random() < 0.3:  # jitter around the consumer's park/wake edges
                time.sleep(rng.random() * 0.0005)
        else:
            time.sleep(gap_s)
        handoff.put((i, time.perf_counter()))
    handoff.put(END)


async def run(n: int, gap_s: float | None, seed: int = 0):  # type: ignore[no-untyped-def]
    handoff = Handoff(asyncio.get_running_loop())
    t = threading.Thread(target=produce, args=(handoff, n, gap_s, seed))
    t.start()
    try:
        return await asyncio.wait_for(consume(handoff), 30)
    finally:
        t.join()


async def test_every_item_arrives_in_order_under_racing_puts():
    for seed in range(5):
        items, sizes, _ = await run(3000, None, seed)
        assert items == list(range(3000))
        assert sum(sizes) == 3001  # and END


async def test_a_fast_producer_is_seen_in_batches_not_per_item():
    _, sizes, _ = await run(2000, None)
    assert len(sizes) < 2000 / 2  # at least two items per wake-up on average


# wall clock, across threads (the exact schedule is checked on virtual time below): a
# token put by another thread wakes the parked consumer; the median wait is a wake-up
# (well under 1 ms idle, a few ms on a loaded machine), under the 10 ms between tokens
@pytest.mark.timing
async def test_a_slow_producer_is_seen_promptly():
    items, sizes, lags = await run(20, 0.01)
    assert items == list(range(20))
    assert max(sizes) <= 2  # a token every 10 ms: seen one by one
    assert sorted(lags)[len(lags) // 2] < 0.01  # seen within rest_s (2 ms) + a wake-up


def _paced_on_virtual_time(gap_s: float, n: int) -> tuple[list[int], list[float], int]:
    """``n`` items put ``gap_s`` apart by timers on the consumer's own loop, on virtual
    time (tests/support/virtual_time.py): (batch sizes, each item's wait from put to
    seen, how many times the consumer rested). Exact on any machine."""
    clock = VirtualClock()
    rests: list[float] = []

    async def main() -> tuple[list[int], list[float]]:
        loop = asyncio.get_running_loop()
        handoff = Handoff(loop)
        for i in range(n):
            loop.call_later(gap_s * (i + 1), lambda i=i: handoff.put((i, loop.time())))
        loop.call_later(gap_s * (n + 1), handoff.close)
        sizes: list[int] = []
        lags: list[float] = []
        async for batch in handoff.batches_until_close():
            sizes.append(len(batch))
            lags += [loop.time() - t for _, t in batch]
        return sizes, lags

    async def rest(seconds: float) -> None:
        rests.append(seconds)
        await real_sleep(seconds)

    real_sleep = asyncio.sleep
    stand_in = SimpleNamespace(**{k: getattr(asyncio, k) for k in dir(asyncio)})
    stand_in.sleep = rest
    handoff_module.asyncio = stand_in  # type: ignore[assignment]
    try:
        sizes, lags = run_virtual(main, clock)
    finally:
        handoff_module.asyncio = asyncio
    assert all(r == REST_S for r in rests)
    return sizes, lags, len(rests)


def test_a_slow_stream_is_seen_at_once_without_rests():
    """A token every 10 ms: each is seen the moment it is put (the parked consumer is
    woken), one per batch, and the consumer never rests (a rest would only add a timer
    wake-up per token)."""
    sizes, lags, rests = _paced_on_virtual_time(0.010, 20)
    assert sizes == [1] * 20 and max(lags) == 0.0 and rests == 0


def test_a_fast_stream_is_seen_in_batches_within_a_rest():
    """A token every 0.5 ms: batches of about REST_S's worth, and no token waits longer
    than one rest to be seen."""
    sizes, lags, rests = _paced_on_virtual_time(0.0005, 200)
    assert sum(sizes) == 200 and len(sizes) < 200 / 3  # about 4 a batch
    assert max(lags) <= REST_S + 1e-9 and rests >= len(sizes) - 2


async def test_items_are_everything_put_before_close():
    handoff = Handoff(asyncio.get_running_loop())

    def producer() -> None:
        try:
            for i in range(1000):
                handoff.put(i)
        finally:
            handoff.close()

    t = threading.Thread(target=producer)
    t.start()
    got = [item async for item in handoff.items()]
    t.join()
    assert got == list(range(1000))
