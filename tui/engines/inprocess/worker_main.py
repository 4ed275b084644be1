"""The engine worker process: hosts one in-process engine for infertop.

Started by :class:`tui.engines.inprocess.worker.WorkerEngine` as ``python -m
tui.engines.inprocess.worker_main FD``, where FD is its end of a socketpair. Native code that
crashes (SIGILL, SIGSEGV, abort) ends this process only; infertop sees the socket close,
reads the exit status and ends the stream with a Failed event.

The hosted engine stamps its events exactly as it does in infertop's own process (the
generation thread stamps each token with ``perf_counter_ns``, the system-wide monotonic
clock, so the stamps mean the same in the parent). This process forwards the events as
they come: from the generation thread of an engine that is a ``ThreadSource`` (its
``generate_into``), the first token at once and then in frames at most every ``GATHER_S``
(see :class:`_FrameSink`); from any other engine's ``stream_into``, each event as it
comes. It drops the engine's RequestSent, since the parent stamps the request when it
sends it. Nothing here writes to stdout; stderr is a file the parent
reads when this process dies.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

from tui.core.cancel import CancelToken
from tui.core.events import Failed, RequestSent, StampSource, TextChunk
from tui.engines.base import (
    END_EVENTS,
    EndGuard,
    Engine,
    EngineError,
    EngineSpec,
    GenerationRequest,
    ThreadSource,
    stream_guarded,
)
from tui.engines.inprocess.worker_wire import FrameReader, WireClosed, send_frame

GATHER_S = 0.05  # after the first token, a frame at most this often (the UI draws at 10 Hz)
FLUSH_EVERY_S = 0.05  # what waits is sent at least this often, even if no event follows


class WorkerServer:
    """Runs commands from the parent on this process's event loop."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()  # generation threads send too
        self.loop = loop
        self.engine: Engine | None = None
        self.cancels: dict[int, CancelToken] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            send_frame(self.sock, message)

    def on_message(self, message: tuple[Any, ...]) -> None:
        """Loop thread: one command from the parent."""
        op = message[0]
        if op == "load":
            self._spawn(self._load(message[1], message[2], message[3]))
        elif op == "stream":
            self._spawn(self._stream(message[1], message[2]))
        elif op == "cancel":
            token = self.cancels.get(message[1])
            if token is not None:
                token.cancel()
        elif op == "close":
            self._spawn(self._close(message[1]))

    def _spawn(self, coro: Any) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _load(self, cid: int, target: str, spec: EngineSpec) -> None:
        try:
            if self.engine is not None:
                await self.engine.close()
                self.engine = None
            module_name, _, cls_name = target.partition(":")
            cls = getattr(importlib.import_module(module_name), cls_name)
            engine: Engine = cls(spec)
            load_ms = await engine.load()
            self.engine = engine
            self.send(("reply", cid, True, (float(load_ms), engine.info())))
        except EngineError as e:
            self.send(("reply", cid, False, str(e)))
        except Exception as e:  # noqa: BLE001 - any load fault is one line for the user
            self.send(("reply", cid, False, f"{type(e).__name__}: {e}"))

    async def _stream(self, rid: int, request: GenerationRequest) -> None:
        engine = self.engine
        if engine is None:
            failed = Failed(time.perf_counter_ns(), "engine is not loaded", "load")
            self.send(("events", rid, [failed]))
            return
        token = CancelToken()
        self.cancels[rid] = token
        threaded = isinstance(engine, ThreadSource)  # events leave from its own thread
        frames = _FrameSink(self, rid, gather=threaded)
        timer = self.loop.create_task(_flush_every(frames)) if threaded else None
        try:
            if isinstance(engine, ThreadSource):
                guard = EndGuard(frames.put)
                try:
                    await engine.generate_into(request, token, _ThreadOut(guard, frames))
                except Exception as e:  # noqa: BLE001 - engines should not raise; if one does
                    guard.raised(e)
                guard.close()
            else:
                await stream_guarded(engine, request, token, frames.put)
        finally:
            if timer is not None:
                timer.cancel()
            frames.flush()
            self.cancels.pop(rid, None)

    async def _close(self, cid: int) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            try:
                await engine.close()
            except Exception:  # noqa: BLE001 - closing is best effort; the process ends next
                pass
        self.send(("reply", cid, True, None))


class _FrameSink:
    """An engine's events → the parent, in frames (from the generation thread of a
    :class:`ThreadSource`, else from this loop: then each event is a frame of its own,
    ``gather=False``).

    Gathering, everything up to and including the first text chunk goes at once (the first
    token is seen as soon as it exists), as does the end (Finished, Failed); between, events
    gather until :data:`GATHER_S` has passed since the last frame. A frame per token cost
    the parent a wake-up of its engine loop per token, ~2.5 % of a core at ~100 tok/s on a
    2-core machine (benchmarks/watch_cost.py), taken from the engine it watches; a frame per
    20 ms still cost the app ~0.6 % of a core more than one per 50 ms (6.05 -> 5.42 % at
    120x40, 2026-12-03), and the UI draws at 10 Hz, so 50 ms is twice what it needs. The
    stamps were taken before, in the generation thread: gathering changes when the parent
    sees an event, never its time. :meth:`flush` (the worker loop's timer, every
    :data:`FLUSH_EVERY_S`) sends what waits, so a stream that stalls after a token still
    shows it."""

    def __init__(self, server: WorkerServer, rid: int, gather: bool = True) -> None:
        self._server = server
        self._rid = rid
        self._gather = gather
        self.ended = False
        self._started = False  # the first text chunk has gone
        self._waiting: list[Any] = []
        self._sent_at = 0.0  # time.monotonic() of the last frame
        self._lock = threading.Lock()  # the generation thread and the loop's timer

    def put(self, event: Any) -> None:
        if type(event) is RequestSent or self.ended:
            return  # the parent stamped the request when it sent it
        if type(event) is StampSource:
            event = in_worker(event)
        self.ended = isinstance(event, END_EVENTS)
        with self._lock:
            self._waiting.append(event)
            first = not self._started and type(event) is TextChunk
            self._started = self._started or first
            if self._gather and self._started and not (first or self.ended):
                if time.monotonic() - self._sent_at < GATHER_S:
                    return
            self._send()

    def flush(self) -> None:
        """Send what has waited at least :data:`GATHER_S` (the loop's timer)."""
        with self._lock:
            if self._waiting and time.monotonic() - self._sent_at >= GATHER_S:
                self._send()

    def _send(self) -> None:  # under the lock: frames leave in the order of the events
        events, self._waiting = self._waiting, []
        self._sent_at = time.monotonic()
        self._server.send(("events", self._rid, events))

    def close(self) -> None:
        pass


async def _flush_every(sink: _FrameSink) -> None:
    while True:
        await asyncio.sleep(FLUSH_EVERY_S)
        sink.flush()


def in_worker(event: StampSource) -> StampSource:
    return StampSource(event.t_ns, f"{event.source} (in infertop's engine worker process)")


class _ThreadOut:
    """What a :class:`ThreadSource` puts its events into here: the stream's end guard in
    front of the frames."""

    def __init__(self, guard: EndGuard, frames: _FrameSink) -> None:
        self.put = guard
        self.close = frames.close


def _read_commands(server: WorkerServer) -> None:
    """Reader thread: parent's commands to the loop. The parent gone = this process ends."""
    reader = FrameReader(server.sock)
    while True:
        try:
            message = reader.read()
        except WireClosed:
            os._exit(0)  # the parent closed (or died): nothing is left to serve
        server.loop.call_soon_threadsafe(server.on_message, message)


async def serve(sock: socket.socket) -> None:
    server = WorkerServer(sock, asyncio.get_running_loop())
    reader = threading.Thread(
        target=_read_commands, args=(server,), name="worker-commands", daemon=True
    )
    reader.start()
    await asyncio.Event().wait()  # runs until the parent closes the socket


def main(argv: list[str]) -> int:
    # Ctrl-C in the terminal reaches the whole process group: the parent decides, not us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[0]))
    sock.setblocking(True)
    asyncio.run(serve(sock))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
