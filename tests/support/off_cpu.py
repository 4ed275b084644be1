"""Wall time that leaves out the operating system's turns given to other processes.

Some tests must be timed by the wall clock: "the UI never froze for a second", "sampling
stays instant while the link is down", "closing does not wait out the backoff". What
they guard against is our thread blocking (a connect, a sleep, a join) or working for
too long. On a busy machine the same thread also spends time *runnable but not running*
while other processes have the CPU; that is no fault of ours, and Linux counts it per
thread (``/proc/thread-self/schedstat``, the second field: run-queue wait, ns).

:class:`Stopwatch` measures wall time minus that wait, for the calling thread: blocking
and our own work count in full, waiting for a CPU does not. Where the kernel does not
say (not Linux, or no schedstats), it is the plain wall time.
"""

from __future__ import annotations

import time


def run_delay_s() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (0 where the
    kernel does not say)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


class Stopwatch:
    """``with Stopwatch() as w: ...`` then ``w.elapsed``: wall seconds less this thread's
    wait for a CPU meanwhile (see the module docstring); ``w.wall`` is the plain wall."""

    def __init__(self) -> None:
        self.elapsed = 0.0
        self.wall = 0.0

    def __enter__(self) -> Stopwatch:
        self._t0, self._d0 = time.monotonic(), run_delay_s()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self._t0
        self.elapsed = self.wall - (run_delay_s() - self._d0)
