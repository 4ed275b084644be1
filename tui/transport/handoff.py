"""Handoff: events from a generating thread to an asyncio consumer, in batches.

A generating thread (llama.cpp's decode loop, the synthetic engine's clock) stamps each
event where it is produced, then :meth:`Handoff.put`\\ s it. Waking the consumer's loop
costs a self-pipe write on the producer and an epoll wake-up on the loop — tens of µs,
per token when done per token. Here the producer only wakes a consumer that is parked
(it found nothing to take); a consumer that is busy, or resting ``rest_s`` after a batch,
finds everything that arrived meanwhile in one batch. So a fast stream costs one wake-up
per batch, a slow one (a token every few ms or more) still one per token, and no event
waits longer than ``rest_s`` plus a wake-up to be seen. The consumer rests only while the
stream is fast (its previous batch came less than ``FAST_GAP_S`` ago): for a slow stream the
rest would only add a timer wake-up per token, and every wake-up takes CPU from the engine.
The stamps were taken before, by the producer: batching changes when an event is *seen*,
never its time.

The producer ends with :meth:`Handoff.close` (in a ``finally``); the consumer takes
:meth:`Handoff.items` up to that end, or :meth:`Handoff.batches` as they came.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

_END = object()  # put by close(): the producer is done
REST_S = 0.002  # after a batch, let the next one gather this long (≈ 4 tokens at 2,000/s)
FAST_GAP_S = 0.005  # batches closer than this (> 200 a second): the stream is fast, rest


class Handoff:
    """One stream's events, from one producing thread to one asyncio consumer."""

    def __init__(self, loop: asyncio.AbstractEventLoop, rest_s: float = REST_S) -> None:
        self._loop = loop
        self._rest_s = rest_s
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        self._parked = False
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: Any) -> None:
        """Producer thread: hand ``item`` over; wakes the consumer only if it is parked."""
        self._items.append(item)
        self._unpark()

    def put_many(self, items: list[Any]) -> None:
        """Producer (a thread, or a callback on the consumer's own loop): hand several
        items over at once (one wake-up at most)."""
        self._items.extend(items)
        self._unpark()

    def _unpark(self) -> None:
        with self._lock:
            if not self._parked:
                return
            self._parked = False
        try:
            same_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            same_loop = False
        if same_loop:  # no self-pipe write needed
            self._loop.call_soon(self._wake)
        else:
            self._loop.call_soon_threadsafe(self._wake)

    def close(self) -> None:
        """Producer thread: nothing more will be put (call it in a ``finally``)."""
        self.put(_END)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def batches(self) -> AsyncGenerator[list[Any], None]:
        """Consumer loop: every item, in order, in batches (never ends on its own)."""
        items = self._items
        clock = self._loop.time
        last = -1.0
        while True:
            if items:
                batch = [items.popleft() for _ in range(len(items))]
                yield batch
                now = clock()
                fast, last = now - last < FAST_GAP_S, now
                if fast and self._rest_s > 0:
                    await asyncio.sleep(self._rest_s)
                continue
            self._waiter = self._loop.create_future()
            with self._lock:
                if items:  # arrived between the check and the lock: take it now
                    continue
                self._parked = True
            await self._waiter

    async def batches_until_close(self) -> AsyncGenerator[list[Any], None]:
        """Consumer: every item, in the batches they came in, until :meth:`close`."""
        async with aclosing(self.batches()) as batches:
            async for batch in batches:
                if batch[-1] is _END:
                    if len(batch) > 1:
                        yield batch[:-1]
                    return
                yield batch

    async def items(self) -> AsyncGenerator[Any, None]:
        """Consumer: every item, in order, until the producer's :meth:`close`."""
        async with aclosing(self.batches()) as batches:
            async for batch in batches:
                for item in batch:
                    if item is _END:
                        return
                    yield item
