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

A reader thread takes the worker's frames and hands each batch of events to the stream's
consumer loop (:class:`~tui.engines.handoff.Handoff`): one wake-up per batch.
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
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any, ClassVar

from tui.core.events import Failed, Finished, RequestSent, StreamEvent
from tui.engines.base import (
    CancelToken,
    Engine,
    EngineError,
    EngineInfo,
    EngineSpec,
    GenerationRequest,
)
from tui.engines.handoff import Handoff
from tui.engines.worker_wire import FrameReader, WireClosed, send_frame

CLOSE_TIMEOUT_S = 10.0

# What to tell the user when the worker dies by one of these signals.
SIGNAL_HINTS = {
    signal.SIGILL: "the engine's build uses an instruction this CPU refuses; run 'infertop doctor'",
    signal.SIGKILL: "killed from outside (out of memory?)",
}


class WorkerEngine(Engine):
    """An in-process engine (``target``, "module:Class") hosted in a worker process."""

    kind: ClassVar[str] = "worker"
    target: ClassVar[str] = ""

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._stderr: IO[bytes] | None = None
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._routes: dict[int, _Route] = {}
        self._replies: dict[int, concurrent.futures.Future[tuple[bool, Any]]] = {}
        self._info: EngineInfo | None = None
        self._load_ms: float | None = None
        self._died: str | None = None  # why the worker ended, while no new one is loaded
        self._closing: subprocess.Popen[bytes] | None = None  # ended on purpose
        self._ready = False  # an engine is loaded in the running worker

    # -- lifecycle ------------------------------------------------------------------
    async def load(self) -> float:
        """Start a worker (if none runs) and load the engine there; return ms until ready
        (process start, imports and model load: what a user waits for)."""
        t0 = time.perf_counter_ns()
        dead = self._proc
        if dead is not None and (self._died is not None or dead.poll() is not None):
            self._detach(dead)  # a worker that died: its successor starts below
        if self._proc is None:
            await asyncio.to_thread(self._start)
        inner = dataclasses.replace(self.spec, options=_inner_options(self.spec.options))
        ok, payload = await self._call("load", self.target, inner)
        if not ok:
            await self.close()
            raise EngineError(str(payload))
        model_ms, info = payload
        self._load_ms = (time.perf_counter_ns() - t0) / 1e6
        info.load_ms = self._load_ms
        info.parameters = {**info.parameters, "model_load_ms": model_ms, "worker": "process"}
        self._info = info
        self._ready = True
        return self._load_ms

    def _start(self) -> None:
        parent, child = socket.socketpair()
        stderr = tempfile.TemporaryFile(prefix="infertop-worker-")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # where the tui package lives
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tui.engines.worker_main", str(child.fileno())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
            )
        except OSError as e:
            parent.close()
            stderr.close()
            raise EngineError(f"could not start the engine process: {e}") from None
        finally:
            child.close()
        self._proc, self._sock, self._stderr = proc, parent, stderr
        self._died = None
        self._ready = False
        threading.Thread(
            target=self._read_frames,
            args=(proc, parent),
            name=f"worker-{self.spec.name}",
            daemon=True,
        ).start()

    async def close(self) -> None:
        """Ask the worker to close its engine, then end the process (bounded)."""
        proc = self._proc
        if proc is None:
            return
        self._closing = proc
        if proc.poll() is None and self._died is None:
            with contextlib.suppress(EngineError, TimeoutError):
                await asyncio.wait_for(self._call("close"), CLOSE_TIMEOUT_S)
        sock = self._sock
        if sock is not None:  # the worker exits when its socket reaches end of stream
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        await asyncio.to_thread(_end_process, proc)
        self._detach(proc)
        self._ready = False

    def _detach(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if self._proc is not proc:
                return
            self._proc = None
            sock, self._sock = self._sock, None
            stderr, self._stderr = self._stderr, None
        if stderr is not None:
            _keep_log(stderr, proc.pid)
        for f in (sock, stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()

    def info(self) -> EngineInfo:
        if self._info is not None:
            info = dataclasses.replace(self._info)
            info.pid = self.pid
            return info
        return EngineInfo(engine=self.spec.name, kind=self.kind, model=str(self.spec.model))

    @property
    def pid(self) -> int | None:
        """The worker's process id (its RSS is the engine's), None when none runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def died(self) -> str | None:
        """Why the worker process ended on its own (None while it runs or was closed)."""
        return self._died

    @property
    def loaded(self) -> bool:
        return self._ready and self._died is None

    # -- streams --------------------------------------------------------------------
    async def stream(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        async for batch in self.stream_batches(request, cancel):
            for event in batch:
                yield event

    async def stream_batches(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[list[StreamEvent]]:
        route = _Route(Handoff(asyncio.get_running_loop()))
        rid = next(self._ids)
        with self._lock:
            live = self._sock is not None and self._died is None and self._ready
            if live:
                self._routes[rid] = route
        t_sent = time.perf_counter_ns()
        if not live:
            yield [RequestSent(t_sent), Failed(t_sent, self._not_ready(), "load")]
            return
        try:
            self._send(("stream", rid, request))
        except OSError:
            pass  # the worker is gone: the reader thread ends the route with the reason
        yield [RequestSent(t_sent)]
        token = cancel or CancelToken()
        forget = token.on_cancel(lambda: self._send_quietly(("cancel", rid)))
        ended = False
        try:
            async for batch in route.handoff.batches_until_close():
                yield batch
            ended = True
        finally:
            forget()
            if not ended:  # the consumer left early: stop the generation in the worker
                self._send_quietly(("cancel", rid))
            with self._lock:
                self._routes.pop(rid, None)

    def _not_ready(self) -> str:
        if self._died is not None:
            return f"{self._died}; reload the engine to start a new one"
        return "engine is not loaded"

    # -- the wire -------------------------------------------------------------------
    def _send(self, message: tuple[Any, ...]) -> None:
        sock = self._sock
        if sock is None:
            raise OSError("no engine process")
        with self._send_lock:
            send_frame(sock, message)

    def _send_quietly(self, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError):
            self._send(message)

    async def _call(self, op: str, *args: Any) -> tuple[bool, Any]:
        cid = next(self._ids)
        reply: concurrent.futures.Future[tuple[bool, Any]] = concurrent.futures.Future()
        with self._lock:
            if self._died is not None or self._sock is None:
                raise EngineError(self._died or "no engine process")
            self._replies[cid] = reply
        try:
            self._send((op, cid, *args))
        except OSError:
            pass  # the reader thread answers with why the worker is gone
        return await asyncio.wrap_future(reply)

    def _read_frames(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        """Reader thread: the worker's frames to their streams; its death to all of them."""
        reader = FrameReader(sock)
        try:
            while True:
                message = reader.read()
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
        except WireClosed:
            pass
        except Exception as e:  # noqa: BLE001 - a corrupt frame: end the worker, say so
            with contextlib.suppress(OSError):
                proc.kill()
            self._ended(proc, f"engine process sent a bad frame ({type(e).__name__}: {e})")
            return
        self._ended(proc, None)

    def _ended(self, proc: subprocess.Popen[bytes], why: str | None) -> None:
        """The worker's socket closed: find out why, and end everything waiting on it."""
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()  # it closed its socket but did not exit: it is of no use now
            code = proc.wait()
        reason = why or describe_exit(code, self._stderr_tail())
        now = time.perf_counter_ns()
        with self._lock:
            if self._proc is proc:
                self._ready = False
                if self._closing is not proc:
                    self._died = reason
            routes, self._routes = list(self._routes.values()), {}
            replies, self._replies = list(self._replies.values()), {}
        for route in routes:
            route.fail(Failed(now, reason, "engine"))
        for reply in replies:
            if not reply.done():
                reply.set_result((False, reason))

    def _stderr_tail(self) -> str:
        f = self._stderr
        if f is None:
            return ""
        try:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4096))
            text = f.read().decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""


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
        hint = SIGNAL_HINTS.get(sig) if sig is not None else None  # type: ignore[call-overload]
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
    return cls  # type: ignore[return-value]
