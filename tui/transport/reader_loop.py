"""The reader loop: a thread with its own asyncio loop where stream work is stamped, and
:func:`relay`, which carries what it emits to the consumer's loop.

Events leave the reader loop in batches: one cross-thread wake-up per consumer loop per
turn of the reader loop (:meth:`LoopThread.post`), however many streams and events that
turn produced. Their stamps were taken before, where the bytes or tokens arrived, so the
batching changes when a consumer *sees* an event, never its time (see
tui/engines/http/http_common.py for the timing rules).

A headless consumer with nothing else on its loop (``infertop bench``) may read on its own
loop instead (:meth:`HttpReader.on_running_loop`): no reader thread, and no cross-thread
wake-up per batch, which at one token per read was most of the client's CPU per token.
Plain http:// bytes are still stamped by the kernel when they arrive (SO_TIMESTAMPNS), so
a busy consumer delays when an event is seen, not its stamp.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tui.core.cancel import CancelToken
from tui.core.events import Failed, Finished, StreamEvent


class LoopThread:
    """A daemon thread running its own asyncio loop, where work is stamped.

    Events for other loops leave in batches (:meth:`post`): one cross-thread wake-up per
    consumer loop per turn of this loop, however many streams and events it carries.
    """

    def __init__(
        self, name: str = "infertop-loop", loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        """Start a thread running a new loop; or, given ``loop`` (already running, owned by
        the caller), use that one and start nothing."""
        self._outbox: list[tuple[asyncio.AbstractEventLoop, Outbox]] = []
        self._thread: threading.Thread | None = None
        if loop is not None:
            self.loop = loop
            return
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        if self._thread is None:
            return not self.loop.is_closed()
        return self._thread.is_alive()

    def submit(self, coro: Awaitable[Any]) -> concurrent.futures.Future[Any] | asyncio.Future[Any]:
        if self._thread is None and _running_loop() is self.loop:
            return asyncio.ensure_future(coro)
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    async def call(self, coro: Awaitable[Any]) -> Any:
        """Run ``coro`` on this loop and await its result from the caller's loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self) -> None:
        """Stop the loop and its thread (bounded wait), then close the loop."""
        if self._thread is None:
            return  # the caller's loop: the caller stops it
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive() and not self.loop.is_closed():
            self.loop.close()

    def post(self, loop: asyncio.AbstractEventLoop, box: Outbox) -> None:
        """This loop only: send ``box``'s events to ``loop`` at the end of this turn."""
        if not self._outbox:
            self.loop.call_soon(self._flush)
        self._outbox.append((loop, box))

    def _flush(self) -> None:
        out, self._outbox = self._outbox, []
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Outbox, list[StreamEvent]]]] = {}
        for loop, box in out:
            batch = box.pending
            box.pending = []
            by_loop.setdefault(loop, []).append((box, batch))
        for loop, items in by_loop.items():
            if loop is self.loop:
                _deliver(items)  # the consumer reads on this loop: no wake-up to send
            else:
                loop.call_soon_threadsafe(_deliver, items)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Outbox:
    """One stream's events waiting on the reader loop, and its queue on the consumer's."""

    __slots__ = ("pending", "queue")

    def __init__(self) -> None:
        self.pending: list[StreamEvent] = []
        self.queue: asyncio.Queue[list[StreamEvent]] = asyncio.Queue()


def _deliver(items: list[tuple[Outbox, list[StreamEvent]]]) -> None:
    for box, batch in items:
        box.queue.put_nowait(batch)


class HttpReader(LoopThread):
    """The one thread + event loop where HTTP bytes are read and stamped."""

    _lock = threading.Lock()
    _instance: HttpReader | None = None
    _adopted: dict[asyncio.AbstractEventLoop, HttpReader] = {}  # see on_running_loop

    def __init__(self) -> None:
        super().__init__("infertop-http-reader")

    @classmethod
    def shared(cls) -> HttpReader:
        """The process-wide reader, started on first use (never at import); or, called on
        a loop inside :meth:`on_running_loop`, that loop's."""
        with cls._lock:
            loop = _running_loop() if cls._adopted else None
            adopted = cls._adopted.get(loop) if loop is not None else None
            if adopted is not None:
                return adopted
            if cls._instance is None or not cls._instance.alive:
                cls._instance = cls()
            return cls._instance

    @classmethod
    @contextmanager
    def on_running_loop(cls) -> Iterator[HttpReader]:
        """Inside: engines made on the caller's running loop read there (no reader thread);
        engines made on any other loop or thread still get the shared reader.

        For a headless consumer that owns its loop (the bench, a bench worker process);
        never for the UI, whose frames would then delay reads."""
        loop = asyncio.get_running_loop()
        reader = cls.__new__(cls)
        LoopThread.__init__(reader, loop=loop)
        with cls._lock:
            before = cls._adopted.get(loop)
            cls._adopted[loop] = reader
        try:
            yield reader
        finally:
            with cls._lock:
                if before is None:
                    cls._adopted.pop(loop, None)
                else:
                    cls._adopted[loop] = before


Emit = Callable[[StreamEvent], None]
_END = (Finished, Failed)  # a tuple: ``Finished | Failed`` would build a union per call


async def relay(
    reader: LoopThread,
    run: Callable[[Emit], Awaitable[None]],
    cancel: CancelToken | None,
) -> AsyncIterator[StreamEvent]:
    """Run ``run(emit)`` on the reader loop; yield what it emits on the caller's loop.

    ``run`` must emit exactly one Finished or Failed last. Cancelling (the token, or the
    consumer closing this generator) cancels the HTTP read on the reader loop.
    """
    async for batch in relay_batches(reader, run, cancel):
        for ev in batch:
            yield ev


async def run_guarded(
    reader_loop: asyncio.AbstractEventLoop,
    run: Callable[[Emit], Awaitable[None]],
    emit: Emit,
    cancel: CancelToken | None,
) -> None:
    """Reader loop: ``run(emit)`` as a task of its own, which ``cancel`` stops (the stream
    then ends with Finished "cancelled"); a bug in it ends the stream with Failed
    "internal" instead of raising."""
    task = asyncio.ensure_future(run(emit))
    by_token = False  # the token cancelled the task (not the consumer)

    def stop() -> None:  # reader loop
        nonlocal by_token
        if not task.done():
            by_token = True
            task.cancel()

    def on_cancel() -> None:  # any thread
        try:
            reader_loop.call_soon_threadsafe(stop)
        except RuntimeError:  # the reader loop is closed: nothing left to stop
            pass

    forget = cancel.on_cancel(on_cancel) if cancel is not None else None
    try:
        try:
            await task
        except asyncio.CancelledError:
            if not by_token:
                raise
            emit(Finished(time.perf_counter_ns(), "cancelled"))
    except asyncio.CancelledError:
        task.cancel()
        raise
    except Exception as e:  # noqa: BLE001 - a bug must still end the stream
        message = f"internal error (a bug in infertop): {type(e).__name__}: {e}"
        emit(Failed(time.perf_counter_ns(), message, "internal"))
    finally:
        if forget is not None:
            forget()


async def relay_into(
    reader: LoopThread,
    run: Callable[[Emit], Awaitable[None]],
    cancel: CancelToken | None,
    sink: Emit,
) -> None:
    """Every event of the stream passed to ``sink`` (on the caller's loop), up to the
    Finished or Failed that ends it.

    A caller on the reader's own loop (the bench: :meth:`HttpReader.on_running_loop`; the
    chat's engine host of an HTTP engine) gets each event the moment it is emitted, from
    the reading task itself: no batch, no queue, no second task woken per read (at one
    token per read those hops were a third of the client's CPU per token). Elsewhere the
    events come by :func:`relay_batches`.
    """
    if reader.loop is not _running_loop():
        async for batch in relay_batches(reader, run, cancel):
            for ev in batch:
                sink(ev)
        return
    ended = False

    def emit(ev: StreamEvent) -> None:
        nonlocal ended
        if not ended:
            ended = isinstance(ev, _END)
            sink(ev)

    await run_guarded(reader.loop, run, emit, cancel)


async def relay_batches(
    reader: LoopThread,
    run: Callable[[Emit], Awaitable[None]],
    cancel: CancelToken | None,
) -> AsyncIterator[list[StreamEvent]]:
    """:func:`relay`, in batches: one cross-thread hand-off per reader-loop turn.

    ``emit`` (reader loop only) collects events; the batch goes to the caller's loop once
    the reader loop's current turn ends (with those of every other stream: see
    :meth:`LoopThread.post`), so all events parsed from one network read travel together.
    Their stamps were taken before, where the bytes arrived.
    """
    loop = asyncio.get_running_loop()
    box = Outbox()
    ended = False  # a Finished/Failed was emitted: anything after it is dropped

    def emit(ev: StreamEvent) -> None:
        nonlocal ended
        if ended:
            return
        if not box.pending:
            reader.post(loop, box)
        box.pending.append(ev)
        ended = isinstance(ev, _END)

    fut = reader.submit(run_guarded(reader.loop, run, emit, cancel))
    try:
        while True:
            batch = await box.queue.get()
            yield batch
            if isinstance(batch[-1], _END):
                return
    finally:
        if not fut.done():
            fut.cancel()
