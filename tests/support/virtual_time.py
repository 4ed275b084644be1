"""Virtual time for tests of timing arithmetic that must not depend on the machine's load.

A paced engine that sleeps 20 ms per token on a busy machine sleeps longer, and a test
that checks "50 tok/s within 10 %" then fails for a reason that is not a bug. With a
:class:`VirtualClock` the same code runs, but time only moves when something sleeps, by
exactly what it asked for: the stamps, rates and ratios come out exact, however slow
the machine is. What is tested is the arithmetic and the concurrency (who waits for
whom), not the operating system's timer.

- :class:`VirtualClock` ``.time`` is a stand-in for the ``time`` module: its clocks
  (``perf_counter_ns``, ``monotonic``, ...) read the virtual time and its ``sleep``
  advances it; everything else is the real module's. Patch it in as the ``time`` of the
  modules under test (``monkeypatch.setattr(module, "time", clock.time)``).
- :class:`VirtualTimeLoop`: an asyncio loop whose ``time()`` is the clock's; when nothing
  is ready to run it jumps to the next timer instead of waiting for it. For code that
  only waits on its own timers (no sockets, no threads that call back).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time as real_time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import TypeVar

T = TypeVar("T")
START_NS = 1_000_000_000_000  # an arbitrary origin, far from 0 like a real monotonic clock


class VirtualClock:
    """Nanoseconds that move only when :meth:`sleep` or :meth:`advance_to` say so."""

    def __init__(self, start_ns: int = START_NS) -> None:
        self._ns = start_ns
        self._lock = threading.Lock()
        self.time = SimpleNamespace(
            **{k: getattr(real_time, k) for k in dir(real_time) if not k.startswith("_")}
        )
        self.time.perf_counter_ns = self.now_ns
        self.time.monotonic_ns = self.now_ns
        self.time.perf_counter = self.now_s
        self.time.monotonic = self.now_s
        self.time.sleep = self.sleep

    def now_ns(self) -> int:
        return self._ns

    def now_s(self) -> float:
        return self._ns / 1e9

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._ns += max(0, round(seconds * 1e9))

    def advance_to(self, seconds: float) -> None:
        """Move to ``seconds`` on this clock, or just past it (never backwards): a timer
        due at ``seconds`` is then due, however the float rounds."""
        with self._lock:
            ns = max(self._ns, math.ceil(seconds * 1e9))
            while ns / 1e9 < seconds:
                ns += 1
            self._ns = ns


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on ``clock``: with nothing ready, time jumps to the next timer."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock

    def time(self) -> float:
        return self.clock.now_s()

    def _run_once(self) -> None:
        scheduled = self._scheduled  # type: ignore[attr-defined]
        if not self._ready and scheduled:  # type: ignore[attr-defined]
            self.clock.advance_to(scheduled[0].when())
        super()._run_once()  # type: ignore[misc]


def run_virtual(main: Callable[[], Awaitable[T]], clock: VirtualClock) -> T:
    """Run ``main()`` to completion on a :class:`VirtualTimeLoop` of ``clock``."""
    loop = VirtualTimeLoop(clock)
    try:
        return loop.run_until_complete(main())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
