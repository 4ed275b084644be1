"""In-process engines, run in a worker process that infertop owns.

llama.cpp (and vLLM's in-process mode) run native code in the process that loads them. A
SIGILL, SIGSEGV or abort in that code kills the process — so it must not be infertop's.
:class:`WorkerEngine` starts ``python -m tui.engines.worker_main`` and drives the real
engine there over a socketpair (:mod:`tui.engines.worker_wire`). When the worker dies, the
stream in flight ends with a Failed event ("engine process died: SIGSEGV
(Segmentation fault)") after everything it streamed; infertop stays up, and ``load()``
starts a fresh worker.

Timing: tokens are stamped in the worker, where they are produced, with
``time.perf_counter_ns`` — CLOCK_MONOTONIC on Linux, mach_absolute_time on macOS,
QueryPerformanceCounter on Windows: one clock for every process on the machine, so the
worker's stamps and this process's stamps are on the same time line
(tests/engines/test_worker.py proves it). RequestSent is stamped here, when the request
is written to the worker, so the hand-over counts inside TTFT as a server's queue would.

The event loop that drives the engine (the chat core's engine-host thread, the bench's
own loop) reads the worker's socket itself (``add_reader``) and hands each batch of
events to the stream's consumer loop (:class:`~tui.transport.handoff.Handoff`): one
wake-up per batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import itertools
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from typing import IO, Any, ClassVar

from tui.core.cancel import CancelToken
from tui.core.child_python import absolute_if_path, child_env, neutral_cwd, python_argv
from tui.core.events import Failed, Finished, RequestSent, StreamEvent
from tui.engines.base import BatchedEngine, EngineError, EngineInfo, EngineSpec, GenerationRequest
from tui.engines.worker_wire import FrameBuffer, send_frame
from tui.transport.handoff import Handoff

CLOSE_TIMEOUT_S = 10.0

# What to tell the user when the worker dies by one of these signals.
SIGNAL_HINTS = {
    signal.SIGILL: "the engine's build uses an instruction this CPU refuses; run 'infertop doctor'",
    signal.SIGKILL: "killed from outside (out of memory?)",
}


class WorkerProcess:
    """One running worker: the process, its socket, its stderr file, and what waits on it.

    The event loop that uses it reads its socket (``add_reader``: one wake-up per frame,
    on the loop that consumes the events) and routes the frames; when the socket closes it
    ends every stream and call waiting on *this* process (a successor has its own), with
    the reason.
    """

    def __init__(self, name: str) -> None:
        parent, child = socket.socketpair()
        self.stderr: IO[bytes] = tempfile.TemporaryFile(prefix="infertop-worker-")
        try:
            # no code from the user's folder: -P, a neutral cwd, absolute import paths
            self.proc = subprocess.Popen(
                python_argv("tui.engines.worker_main", str(child.fileno())),
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.stderr,
                env=child_env(),
                cwd=neutral_cwd(),
            )
        except OSError as e:
            parent.close()
            self.stderr.close()
            raise EngineError(f"could not start the engine process: {e}") from None
        finally:
            child.close()
        self.sock = parent
        self.died: str | None = None  # why it ended, when it ended on its own
        self.closing = False  # ended on purpose (close())
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._routes: dict[int, _Route] = {}
        self._replies: dict[int, concurrent.futures.Future[tuple[bool, Any]]] = {}
        self._ended = threading.Event()
        self._frames = FrameBuffer()
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop reading the socket
        self._end_started = False

    def attach(self) -> None:
        """Read the socket on the running loop, unless another live loop already does
        (the loop a worker was started on may have closed since: ``asyncio.run`` twice)."""
        loop = asyncio.get_running_loop()
        old = self._loop
        if old is loop or self._end_started:
            return
        if old is not None and old.is_running():
            return
        if old is not None and not old.is_closed():
            old.remove_reader(self.sock.fileno())
        self._loop = loop
        loop.add_reader(self.sock.fileno(), self._on_readable)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return not self._ended.is_set() and self.proc.poll() is None

    # -- sending --------------------------------------------------------------------
    def send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            send_frame(self.sock, message)

    def send_quietly(self, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError):
            self.send(message)

    async def call(self, op: str, *args: Any) -> tuple[bool, Any]:
        """Send ``op`` and await the worker's reply: (ok, payload)."""
        self.attach()
        cid = next(self._ids)
        reply: concurrent.futures.Future[tuple[bool, Any]] = concurrent.futures.Future()
        with self._lock:
            if self._ended.is_set():
                return False, self.died or "the engine process has ended"
            self._replies[cid] = reply
        self.send_quietly((op, cid, *args))  # if it is gone, the reader answers why
        return await asyncio.wrap_future(reply)

    def open_route(self, loop: asyncio.AbstractEventLoop) -> tuple[int, _Route] | None:
        """A new stream's route (None when this worker has ended)."""
        self.attach()
        rid = next(self._ids)
        route = _Route(Handoff(loop))
        with self._lock:
            if self._ended.is_set():
                return None
            self._routes[rid] = route
        return rid, route

    def close_route(self, rid: int) -> None:
        with self._lock:
            self._routes.pop(rid, None)

    # -- receiving ------------------------------------------------------------------
    def _on_readable(self) -> None:
        """Loop callback: what the worker sent, to its streams and calls (one recv: the
        socket is readable, so it does not block)."""
        why = None
        try:
            data = self.sock.recv(1 << 16)
        except OSError:
            data = b""
        if data:
            try:
                messages = self._frames.feed(data)
            except Exception as e:  # noqa: BLE001 - a corrupt frame: end the worker, say so
                with contextlib.suppress(OSError):
                    self.proc.kill()
                why = f"engine process sent a bad frame ({type(e).__name__}: {e})"
            else:
                for message in messages:
                    self._dispatch(message)
                return
        loop = self._loop
        if loop is not None:
            loop.remove_reader(self.sock.fileno())
        self._end_started = True
        # waiting for the exit status must not block the loop
        threading.Thread(target=self._end, args=(why,), name="worker-end", daemon=True).start()

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        op = message[0]
        if op == "events":
            with self._lock:
                route = self._routes.get(message[1])
            if route is not None:
                route.deliver(message[2])
        elif op == "reply":
            with self._lock:
                reply = self._replies.pop(message[1], None)
            if reply is not None:
                reply.set_result((bool(message[2]), message[3]))

    def _end(self, why: str | None) -> None:
        """The socket closed: find out why, and end everything waiting on this worker."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # it closed its socket but did not exit: it is of no use now
            code = self.proc.wait()
        reason = why or describe_exit(code, self.stderr_tail())
        now = time.perf_counter_ns()
        with self._lock:
            if not self.closing:
                self.died = reason
            self._ended.set()
            routes, self._routes = list(self._routes.values()), {}
            replies, self._replies = list(self._replies.values()), {}
        for route in routes:
            route.fail(Failed(now, reason, "engine"))
        for reply in replies:
            if not reply.done():
                reply.set_result((False, reason))

    def stderr_tail(self) -> str:
        try:
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - 4096))
            text = self.stderr.read().decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""

    # -- ending ---------------------------------------------------------------------
    async def close(self) -> None:
        """Ask the worker to close its engine, then end the process (bounded)."""
        self.closing = True
        self.attach()
        if self.running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.call("close"), CLOSE_TIMEOUT_S)
        with contextlib.suppress(OSError):  # the worker exits at end of stream
            self.sock.shutdown(socket.SHUT_RDWR)
        await asyncio.to_thread(_end_process, self.proc)
        if not await asyncio.to_thread(self._ended.wait, 5):  # nobody read the end: do it
            self._end_started = True
            self._end(None)
        self.release()

    def release(self) -> None:
        """Close our ends (after the process has ended); keep its log lines. On the loop
        that reads the socket, or after that loop has closed."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and not self._end_started:
            with contextlib.suppress(Exception):
                loop.remove_reader(self.sock.fileno())
        _keep_log(self.stderr, self.pid)
        for f in (self.sock, self.stderr):
            with contextlib.suppress(OSError):
                f.close()


class WorkerEngine(BatchedEngine):
    """An in-process engine (``target``, "module:Class") hosted in a worker process."""

    kind: ClassVar[str] = "worker"
    target: ClassVar[str] = ""

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        self._worker: WorkerProcess | None = None
        self._info: EngineInfo | None = None
        self._ready = False  # an engine is loaded in the running worker

    # -- lifecycle ------------------------------------------------------------------
    async def load(self) -> float:
        """Start a worker (if none runs) and load the engine there; return ms until ready
        (process start, imports and model load: what a user waits for)."""
        t0 = time.perf_counter_ns()
        worker = self._worker
        if worker is not None and not worker.running:  # it died: its successor starts below
            worker.release()
            worker = self._worker = None
        if worker is None:
            worker = self._worker = await asyncio.to_thread(WorkerProcess, self.spec.name)
        self._ready = False
        # the worker runs in a neutral folder: a relative model path is made absolute here
        inner = dataclasses.replace(
            self.spec,
            model=absolute_if_path(self.spec.model),
            options=_inner_options(self.spec.options),
        )
        ok, payload = await worker.call("load", self.target, inner)
        if not ok:
            await self.close()
            raise EngineError(str(payload))
        model_ms, info = payload
        load_ms = (time.perf_counter_ns() - t0) / 1e6
        info.load_ms = load_ms
        info.parameters = {**info.parameters, "model_load_ms": model_ms, "worker": "process"}
        self._info = info
        self._ready = True
        return load_ms

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        self._ready = False
        if worker is not None:
            await worker.close()

    def request_controls(self, request: GenerationRequest) -> dict[str, str]:
        """The hosted engine's own (its class says; nothing needs the worker)."""
        from tui.engines.kinds import engine_class

        fixed = engine_class(self.kind).fixed_controls(request)
        return fixed if fixed is not None else super().request_controls(request)

    def info(self) -> EngineInfo:
        if self._info is not None:
            info = dataclasses.replace(self._info)
            info.pid = self.pid
            return info
        return EngineInfo(engine=self.spec.name, kind=self.kind, model=str(self.spec.model))

    @property
    def pid(self) -> int | None:
        """The worker's process id (its RSS is the engine's), None when none runs."""
        worker = self._worker
        return worker.pid if worker is not None and worker.running else None

    @property
    def died(self) -> str | None:
        """Why the worker process ended on its own (None while it runs or was closed)."""
        worker = self._worker
        return None if worker is None else worker.died

    @property
    def loaded(self) -> bool:
        worker = self._worker
        return self._ready and worker is not None and worker.running

    # -- streams --------------------------------------------------------------------

    async def stream_batches(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[list[StreamEvent]]:
        worker = self._worker
        opened = worker.open_route(asyncio.get_running_loop()) if worker and self._ready else None
        t_sent = time.perf_counter_ns()
        if worker is None or opened is None:
            yield [RequestSent(t_sent), Failed(t_sent, self._not_ready(), "load")]
            return
        rid, route = opened
        worker.send_quietly(("stream", rid, request))  # if it is gone, the reader says why
        yield [RequestSent(t_sent)]
        token = cancel or CancelToken()
        forget = token.on_cancel(lambda: worker.send_quietly(("cancel", rid)))
        ended = False
        try:
            async for batch in route.handoff.batches_until_close():
                yield batch
            ended = True
        finally:
            forget()
            if not ended:  # the consumer left early: stop the generation in the worker
                worker.send_quietly(("cancel", rid))
            worker.close_route(rid)

    def _not_ready(self) -> str:
        died = self.died
        if died is not None:
            return f"{died}; reload the engine to start a new one"
        return "engine is not loaded"


class _Route:
    """One stream's way from the reader thread to its consumer."""

    __slots__ = ("handoff", "done")

    def __init__(self, handoff: Handoff) -> None:
        self.handoff = handoff
        self.done = False

    def deliver(self, events: list[StreamEvent]) -> None:
        if self.done:
            return
        self.handoff.put_many(events)
        last = events[-1] if events else None
        if isinstance(last, (Finished, Failed)):
            self.done = True
            self.handoff.close()

    def fail(self, failed: Failed) -> None:
        if not self.done:
            self.done = True
            self.handoff.put_many([failed])
            self.handoff.close()


def describe_exit(returncode: int, stderr_tail: str = "") -> str:
    """One line for the user: how the worker ended ("engine process died: SIGSEGV ...")."""
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
            name, text = sig.name, signal.strsignal(sig) or ""
        except ValueError:
            sig, name, text = None, f"signal {-returncode}", ""
        line = f"engine process died: {name}" + (f" ({text})" if text else "")
        hint = SIGNAL_HINTS.get(sig) if sig is not None else None
        if hint:
            line += f" — {hint}"
    else:
        line = f"engine process exited with status {returncode}"
    if stderr_tail:
        line += f"; last words: {stderr_tail}"
    return line


def _keep_log(stderr: IO[bytes], pid: int) -> None:
    """Copy what the worker wrote to stderr (llama.cpp's log lines) to our fd 2 when that
    is a log file (the TUI points it at engine-stderr.log), never onto a terminal."""
    try:
        if os.isatty(2):
            return
        stderr.seek(0)
        data = stderr.read()
        if data:
            os.write(2, f"[infertop] engine worker {pid} stderr:\n".encode() + data)
    except (OSError, ValueError):
        pass


def _end_process(proc: subprocess.Popen[bytes]) -> None:
    """Let the worker exit on its own (its socket closes), else terminate, else kill."""
    for stop in (None, proc.terminate, proc.kill):
        if stop is not None:
            with contextlib.suppress(OSError):
                stop()
        try:
            proc.wait(timeout=2 if stop is None else 5)
            return
        except subprocess.TimeoutExpired:
            continue


def _inner_options(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k != "isolate"}


@functools.cache
def worker_class(kind: str, target: str) -> type[WorkerEngine]:
    """The WorkerEngine class that hosts engine kind ``kind`` (``target`` = module:Class)."""
    name = "".join(part.capitalize() for part in kind.replace("-", "_").split("_")) + "Worker"
    cls = type(name, (WorkerEngine,), {"kind": kind, "target": target, "__module__": __name__})
    return cls
