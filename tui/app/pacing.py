"""AppendPacer: how often streamed text is handed to the output pane.

An append repaints the pane's plain-text tail (and, about once a second, hands complete
blocks to the Markdown widget, whose layout cost grows with the document). The pacer
keeps the UI thread's CPU share near a budget: it reads ``time.thread_time()`` (CPU of
the calling thread, the UI's) once a second; above ``budget`` the interval between
appends doubles (up to ``slowest_s``), below half the budget it halves (down to
``1 / max_hz``). Text is never dropped — a longer interval only batches more tokens into
one append, so a frame always shows the latest state.
"""

from __future__ import annotations

import time


class AppendPacer:
    def __init__(self, max_hz: float = 30.0, budget: float = 0.25, slowest_s: float = 0.5) -> None:
        self.fastest_s = 1.0 / max_hz
        self.slowest_s = slowest_s
        self.budget = budget
        self.interval_s = self.fastest_s
        self.share: float | None = None
        self._t0 = time.monotonic()
        self._c0 = time.thread_time()

    def interval(self) -> float:
        """The current minimum gap between appends; re-evaluated about once a second."""
        now = time.monotonic()
        if now - self._t0 >= 1.0:
            cpu = time.thread_time()
            self.share = (cpu - self._c0) / (now - self._t0)
            self._t0, self._c0 = now, cpu
            if self.share > self.budget:
                self.interval_s = min(self.slowest_s, self.interval_s * 2)
            elif self.share < self.budget / 2:
                self.interval_s = max(self.fastest_s, self.interval_s / 2)
        return self.interval_s
