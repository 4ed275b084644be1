"""The event loop a headless bench process runs on: uvloop where it is installed.

The bench client's CPU per token, at one token per network read (a fast server, many
streams: benchmarks/client_throughput.py), is mostly the work of one loop turn per read;
uvloop's turn (libuv, in C) costs less than asyncio's own. Measured in one run on this
project's 2-core machine: 24.4 µs of client CPU per token on uvloop against 28.0 on
asyncio's loop (median of 4 interleaved runs each). Nothing about the measurement
changes: HTTP bytes are stamped by the kernel as they arrive (or as each read returns),
never by the loop. Where uvloop is missing (Windows) asyncio's loop is used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_name() -> str:
    """Which loop :func:`run` uses here (for the report's environment)."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    return f"uvloop {getattr(uvloop, '__version__', '?')}"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, on uvloop where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
