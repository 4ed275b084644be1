"""EngineHost: one engine on its own thread and asyncio loop, off the caller's event loop.

Stream events are stamped where they happen (the engine's thread, where bytes arrive).
Running the engine's coroutines on a loop of their own keeps HTTP read stamps free of a
front end's stalls (the TUI's render on its loop); callers await these coroutines through
``asyncio.wrap_future``, and the engine's loop never touches a caller's objects except
the ``sink`` it is given. The loop runs in a :class:`~tui.transport.reader_loop.LoopThread`,
the one loop-thread primitive of the project.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from tui.core.cancel import CancelToken
from tui.core.events import StreamEvent
from tui.engines.base import Engine, EngineError, EngineInfo, EngineSpec, stream_guarded
from tui.engines.kinds import find_kind
from tui.engines.registry import create_engine
from tui.transport.reader_loop import LoopThread

# What the host's engine is doing (chat's EngineStateChanged says it to the front ends).
HostState = Literal["idle", "loading", "ready", "generating", "error"]
IDLE: HostState = "idle"
LOADING: HostState = "loading"
READY: HostState = "ready"
GENERATING: HostState = "generating"
ERROR: HostState = "error"
SHARE_READER_LOOP = True  # see EngineHost._loop_thread


class EngineHost:
    """Owns an engine's lifecycle and the thread its coroutines run on."""

    def __init__(self, spec: EngineSpec) -> None:
        self.spec = spec
        self.engine: Engine | None = None
        self.state: HostState = IDLE
        self.error: str | None = None
        self.load_ms: float | None = None
        self._thread: LoopThread | None = None
        self._own_thread = True

    # -- plumbing -------------------------------------------------------------------
    def _submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        if self._thread is None:
            self._thread = self._loop_thread()
        return asyncio.run_coroutine_threadsafe(coro, self._thread.loop)

    def _loop_thread(self) -> LoopThread:
        """An engine that only talks to a running server runs on the HTTP reader's loop,
        where its bytes are read and stamped anyway (one thread hop less per batch of
        events). benchmarks/ui_itl_under_load.py, 2026-12-01, two runs each way: ITL with
        the UI vs the server's send gaps p50 0.003 ms either way, p99 0.111 / 0.125 ms
        shared vs 0.181 / 0.134 ms on an own thread: no worse, so shared (set
        SHARE_READER_LOOP = False to compare again); every other engine gets a
        loop thread of its own (the in-process ones)."""
        kind = find_kind(self.spec.kind)
        if SHARE_READER_LOOP and self.spec.url and kind is not None and kind.http:
            from tui.transport.reader_loop import HttpReader

            self._own_thread = False
            return HttpReader.shared()
        return LoopThread(f"engine-{self.spec.name}")

    # -- lifecycle ------------------------------------------------------------------
    async def load(self) -> float:
        """Build and load the engine on its loop; raises EngineError with a plain message."""
        self.state, self.error = LOADING, None
        try:
            ms: float = await asyncio.wrap_future(self._submit(self._load()))
        except EngineError as e:
            self.state, self.error = ERROR, str(e)
            raise
        except Exception as e:  # a library fault during load: still one line for the user
            self.state, self.error = ERROR, f"{type(e).__name__}: {e}"
            raise EngineError(self.error) from e
        self.state, self.load_ms = READY, ms
        return ms

    async def _load(self) -> float:
        old, self.engine = self.engine, None
        if old is not None:  # a reload (e.g. after its worker process died): end the old one
            try:
                await asyncio.wait_for(old.close(), 15)
            except Exception:  # noqa: BLE001 - the old engine is going away either way
                pass
        self.engine = create_engine(self.spec)
        return float(await self.engine.load())

    def info(self) -> EngineInfo | None:
        return None if self.engine is None else self.engine.info()

    async def stream(
        self, request: Any, cancel: CancelToken, sink: Callable[[StreamEvent], None]
    ) -> None:
        """Run one stream to its end, handing every event to ``sink`` (in the engine thread).

        If the awaiting worker is cancelled, the cancel token is set and the stream is
        given up to 10 s to end on its own, so it still ends with Finished/Failed.
        """
        if self.engine is None:
            raise EngineError(f"engine {self.spec.name!r} is not loaded")
        self.state = GENERATING
        fut = self._submit(self._stream(request, cancel, sink))
        try:
            await asyncio.shield(asyncio.wrap_future(fut))
        except asyncio.CancelledError:
            cancel.cancel()
            await asyncio.to_thread(_wait, fut, 10.0)
            raise
        finally:
            if self.state == GENERATING:
                self.state = READY
            died = getattr(self.engine, "died", None)
            if died:  # its worker process is gone: the next prompt reloads it
                self.state, self.error = ERROR, died

    async def _stream(
        self, request: Any, cancel: CancelToken, sink: Callable[[StreamEvent], None]
    ) -> None:
        """The engine's one entry point (``stream_into``), its end guaranteed: every event
        to ``sink`` in this loop's thread (for an HTTP engine, in the read callback)."""
        assert self.engine is not None
        await stream_guarded(self.engine, request, cancel, sink)

    def close(self) -> None:
        """Close the engine and stop its thread (blocking, bounded)."""
        thread = self._thread
        if thread is None:
            return
        if self.engine is not None:
            try:
                self._submit(self.engine.close()).result(timeout=10)
            except Exception:
                pass
        if self._own_thread:
            thread.stop()
        self._thread = None
        self.engine = None
        self.state = IDLE


def _wait(fut: concurrent.futures.Future[Any], timeout: float) -> None:
    try:
        fut.result(timeout=timeout)
    except Exception:
        pass
