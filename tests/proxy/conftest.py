"""Proxy tests: a proxy on its own thread (the real code, a real socket) in front of the
pace server, a scripted upstream or a fault server; clients are raw sockets, httpx, or
the real SDKs (tests/http/test_proxy_real.py has the real engines)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support import pace_server
from tui.proxy.server import ProxyConfig, ProxyThread


@pytest.fixture
def pace() -> Iterator[tuple[str, pace_server.PaceServer]]:
    """A pace server: 20 ms to the first token, then one every 10 ms, 16 tokens."""
    port, server, stop = pace_server.start_in_thread(
        pace_server.PaceConfig(interval_ms=10, ttft_ms=20, tokens=16)
    )
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        stop()


@pytest.fixture
def start_proxy() -> Iterator[Callable[..., ProxyThread]]:
    """``start_proxy(upstream_url, **config)`` → a running ProxyThread (its ``url``)."""
    running: list[ProxyThread] = []

    def start(upstream: str, outcomes=None, **kw) -> ProxyThread:  # type: ignore[no-untyped-def]
        kw.setdefault("listen_port", 0)
        kw.setdefault("kind", "openai")
        t = ProxyThread(ProxyConfig(upstream=upstream, **kw), outcomes)
        t.start()
        running.append(t)
        return t

    try:
        yield start
    finally:
        for t in running:
            t.stop()
