"""The proxy itself: its listening socket, upstream pool, book, metrics and events, run
on an event loop of its own (:class:`ProxyThread` for tests and embedding; the command
runs it on the main thread). It makes the parts and hands each client connection
(:mod:`tui.proxy.client_conn`) the ones it uses (:class:`~tui.proxy.client_socket.
ClientParts`, with the exchanges' :class:`~tui.proxy.exchange.Forwarding`); nothing the
proxy runs refers back to it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tui.core.outcome import Outcomes
from tui.core.trace_context import TraceMode
from tui.proxy.book import TICK_S, RequestBook
from tui.proxy.client_conn import ClientConnection
from tui.proxy.client_socket import ClientParts, ClientSocket
from tui.proxy.events_file import EventsWriter
from tui.proxy.exchange import Forwarding
from tui.proxy.exposition import ProxyMetrics
from tui.proxy.identity import ClientKeys
from tui.proxy.limits import BodyBudget, ClientSlots
from tui.proxy.peer_process import ProcessFinder
from tui.proxy.truth import ScrapedTruth
from tui.proxy.upstream import UpstreamPool
from tui.proxy.why import ProxyWhy

SWEEP_S = 0.1  # how often client deadlines are checked (they hold to about this)


@dataclass
class ProxyConfig:
    """What one proxy does (seconds, bytes)."""

    upstream: str  # http://host:port of the server forwarded to
    kind: str = "openai"  # its kind, as detected (or given)
    version: str | None = None
    listen_host: str = "127.0.0.1"
    listen_port: int = 8800
    connect_timeout: float = 10.0
    read_timeout: float = 600.0  # the answer's head and first body bytes
    stall_timeout: float = 600.0  # any later gap between the upstream's reads
    client_timeout: float = 60.0  # a request's head and body, from its first byte
    idle_timeout: float = 75.0  # a kept-alive client connection, between requests
    client_stall: float = 120.0  # a client that reads nothing of its answer this long
    max_body: int = 32 * 1024 * 1024  # one request's body
    body_budget: int = 256 * 1024 * 1024  # every body held at once (tui/proxy/limits.py)
    body_per_peer: int | None = None  # one peer's bodies (None: half the budget, >= max_body)
    max_clients: int = 1024
    max_per_address: int | None = None  # connections of one peer (None: half of the above)
    events_path: str | Path | None = None
    engine_truth: bool = True  # vLLM: read its /metrics while idle (tui/proxy/truth.py)
    engine_inside: bool = True  # read the engine's inside while idle and watched (why.py)
    # who sent each request (tui/proxy/identity.py): API keys' fingerprints (None: none
    # taken), and the local process owning a loopback client's socket
    client_keys: ClientKeys | None = None
    find_processes: bool = False
    top_clients: int = 10  # clients /infertop/metrics names apart (tui/proxy/exposition.py)
    trace: TraceMode = "off"  # a request's traceparent (tui/proxy/tracing.py)


class Proxy:
    """A running proxy: its listening socket, upstream pool, book, metrics, events.

    ``outcomes``: where every finished generation request is published (one
    :class:`~tui.core.outcome.RequestOutcome` each, from the book); a sink (the ledger,
    spans, alerts) is added to it before :meth:`start`, and closed by :meth:`close`."""

    def __init__(
        self,
        config: ProxyConfig,
        note: Callable[[str], None] | None = None,
        outcomes: Outcomes | None = None,
    ) -> None:
        self.config = config
        self.outcomes = outcomes if outcomes is not None else Outcomes()
        parts = urlsplit(config.upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the upstream must be an http:// URL, not {config.upstream!r}")
        self.pool = UpstreamPool(parts.hostname, parts.port or 80, config.connect_timeout)
        self.metrics = ProxyMetrics(parts.netloc, config.kind, config.top_clients)
        self.events = EventsWriter(config.events_path) if config.events_path else None
        info = {
            "upstream": config.upstream,
            "kind": config.kind,
            "version": config.version,
            "listen": None,
        }
        self.book = RequestBook(
            self.metrics, f"{config.kind}@{parts.netloc}", self.events, None, info, self.outcomes
        )
        self.why = self.book.why = ProxyWhy(config.kind, config.upstream, config.engine_inside)
        self._inside: asyncio.Task[None] | None = None
        self.connections: set[ClientSocket] = set()
        per_address = config.max_per_address or max(1, config.max_clients // 2)
        self.slots = ClientSlots(config.max_clients, per_address)
        per_peer = config.body_per_peer or max(config.max_body, config.body_budget // 2)
        self.budget = BodyBudget(config.body_budget, per_peer)
        self.finder = ProcessFinder() if config.find_processes else None
        self.forwarding = Forwarding(
            self.pool,
            parts.netloc,
            parts.path.rstrip("/"),  # an upstream behind a path (a gateway)
            config.read_timeout,
            config.stall_timeout,
            self.book,
            self.budget,
            config.client_keys,
            self.finder,
            config.trace,
        )
        self.client_parts = ClientParts(
            config.client_timeout,
            config.idle_timeout,
            config.client_stall,
            config.max_body,
            self.slots,
            self.connections,
            self.forwarding,
            self.note,
        )
        self.server: asyncio.base_events.Server | None = None
        self._ticks: asyncio.Task[None] | None = None
        self.notes: list[str] = []
        self._note = note
        self.address: tuple[str, int] = ("", 0)

    def note(self, text: str) -> None:
        self.notes = [*self.notes[-99:], text]
        if self._note is not None:
            self._note(text)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    async def start(self) -> tuple[str, int]:
        """Listen (and, for vLLM with engine truth on, take the first idle scrape)."""
        loop = asyncio.get_running_loop()
        config = self.config
        if config.engine_truth and config.kind == "vllm":
            book = self.book
            book.truth = ScrapedTruth(config.upstream, lambda: book.starts, lambda: book.active)
            await book.truth.refresh()
        self.server = await loop.create_server(
            lambda: ClientConnection(self.client_parts),
            config.listen_host,
            config.listen_port,
            backlog=1024,
            reuse_address=True,
        )
        sock = self.server.sockets[0].getsockname()
        self.address = (str(sock[0]), int(sock[1]))
        self.book.info["listen"] = self.url
        self._ticks = loop.create_task(self._tick())
        self._inside = loop.create_task(self.why.run(self.book))
        return self.address

    async def _tick(self) -> None:
        """Every SWEEP_S: reads waiting observed, client deadlines; every TICK_S: the
        watchers' tick."""
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + TICK_S
        while True:
            await asyncio.sleep(SWEEP_S)
            self.book.settle()
            now = loop.time()
            for conn in list(self.connections):
                conn.check_deadline(now)
            if now >= next_tick:
                next_tick = now + TICK_S
                self.book.tick()

    async def close(self) -> None:
        if self._ticks is not None:
            self._ticks.cancel()
        if self._inside is not None:
            self._inside.cancel()
        for task in list(self.why.tasks):
            task.cancel()
        if self.why.reader is not None:
            self.why.reader.close()
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        await asyncio.sleep(0)
        for task in list(self.book.tasks):
            task.cancel()
        self.pool.close()
        if self.finder is not None:
            self.finder.close()
        if self.book.truth is not None:
            self.book.truth.close()
        if self.events is not None:
            await asyncio.to_thread(self.events.close)
        await asyncio.to_thread(self.outcomes.close)


def run_loop(coro: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run(coro)``, on uvloop where it is installed (its loop turn costs less
    per forwarded read than asyncio's own)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


class ProxyThread:
    """A proxy on a thread with its own loop (tests, benchmarks, embedding)."""

    def __init__(self, config: ProxyConfig, outcomes: Outcomes | None = None) -> None:
        self.config = config
        self.outcomes = outcomes if outcomes is not None else Outcomes()
        self.proxy: Proxy | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self.url = ""
        self._thread = threading.Thread(target=self._run, name="infertop-proxy", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                self.proxy = Proxy(self.config, outcomes=self.outcomes)
                await self.proxy.start()
            except BaseException as e:
                self._error = e
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            await self.proxy.close()

        run_loop(main())

    def start(self, timeout: float = 30.0) -> str:
        """Start; returns the proxy's URL."""
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the proxy did not start")
        if self._error is not None:
            raise self._error
        assert self.proxy is not None
        self.url = self.proxy.url
        return self.url

    def call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """``fn()`` on the proxy's loop (to read its state safely from another thread),
        once the reads waiting have been observed."""
        assert self.loop is not None

        async def run() -> Any:
            if self.proxy is not None:
                self.proxy.book.settle()
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self, timeout: float = 15.0) -> None:
        if not self._thread.is_alive():
            return
        if self.loop is not None and self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
