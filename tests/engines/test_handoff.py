"""Handoff: every item from a producing thread reaches the consumer, in order, in batches."""

from __future__ import annotations

import asyncio
import random
import threading
import time

from tui.transport.handoff import Handoff

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


async def test_a_slow_producer_is_seen_promptly():
    items, sizes, lags = await run(20, 0.01)
    assert items == list(range(20))
    assert max(sizes) <= 2  # a token every 10 ms: seen one by one
    assert sorted(lags)[len(lags) // 2] < 0.01  # seen within rest_s (2 ms) + a wake-up


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
