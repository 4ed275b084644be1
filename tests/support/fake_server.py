"""What the fake servers on asyncio streams share (the pace, fault and hostile servers):
listening, keeping each connection's task and writer, ending them all on stop, and
running one on a daemon thread of its own; plus a head reader for the servers that answer
one request per connection.

A subclass answers a connection in :meth:`FakeServer.serve`; the base has already noted
its task and writer, so :meth:`FakeServer.stop` can end it wherever it waits.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]


class FakeServer:
    """A server on asyncio streams whose connections :meth:`stop` ends, every one."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, host: str = "127.0.0.1", port: int = 0, **listen: Any) -> int:
        """Listen (``listen``: asyncio.start_server's keywords, e.g. ``ssl``, ``backlog``);
        returns the port."""
        self._server = await asyncio.start_server(self._conn, host, port, **listen)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening and end every open connection."""
        if self._server is not None:
            self._server.close()
        # Abort the sockets (not the tasks: asyncio logs cancelled connection handlers).
        for w in list(self._writers):
            w.transport.abort()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._writers.add(writer)
        task.add_done_callback(lambda _t: self._writers.discard(writer))
        await self.serve(reader, writer)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection (the subclass's)."""
        raise NotImplementedError


async def read_path(reader: asyncio.StreamReader) -> str:
    """Read one request (its head and a Content-Length body); return its path."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for ln in lines[1:]:
        if ln.lower().startswith("content-length:"):
            length = int(ln.split(":", 1)[1])
    if length:
        await reader.readexactly(length)
    return lines[0].split(" ")[1]


S = TypeVar("S", bound=FakeServer)


def start_in_thread(
    server: S, name: str, host: str = "127.0.0.1", port: int = 0, **listen: Any
) -> tuple[int, S, Callable[[], None]]:
    """Serve ``server`` on a daemon thread with a loop of its own; returns (port, server,
    stop)."""
    loop = asyncio.new_event_loop()
    ports: list[int] = []
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        ports.append(loop.run_until_complete(server.start(host, port, **listen)))
        started.set()
        loop.run_forever()

    th = threading.Thread(target=run, name=name, daemon=True)
    th.start()
    if not started.wait(10):
        raise RuntimeError(f"{name} did not start")

    def stop() -> None:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        th.join(5)

    return ports[0], server, stop


def support_command(module: str, *args: str) -> list[str]:
    """``python -m tests.support.MODULE ARGS`` for a support server in a process of its own
    (this interpreter); start it with :func:`support_env`, which names the repository
    root on its import path (``-P``: never the working directory)."""
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *safe, "-m", f"tests.support.{module}", *args]


def support_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for :func:`support_command`: ``base`` (default: this process's)
    with the repository root first on ``PYTHONPATH``."""
    import os

    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env
