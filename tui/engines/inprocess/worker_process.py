"""The worker process an in-process engine runs in (see :mod:`tui.engines.inprocess.worker`).

:class:`WorkerProcess` starts ``python -m tui.engines.inprocess.worker_main`` (from a neutral
folder, never able to import from the user's current one), talks to it over a socketpair
in frames (:mod:`tui.engines.inprocess.worker_wire`), routes each stream's events to its consumer,
keeps the tail of its stderr, and says in one line how it ended
(:func:`describe_exit`: "engine process died: SIGILL ... run 'infertop doctor'").
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import IO, Any

from tui.core.child_python import child_env, neutral_cwd, python_argv
from tui.core.events import Failed, Finished, StreamEvent
from tui.engines.base import EngineError
from tui.engines.inprocess.worker_wire import FrameBuffer, send_frame
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
                python_argv("tui.engines.inprocess.worker_main", str(child.fileno())),
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
