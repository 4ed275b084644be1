"""Rolling windows of recent values, for sparklines and live p50/p90."""

from __future__ import annotations

import threading
from collections import deque

from tui.core.stats import percentile


class RollingWindow:
    """The last ``size`` values. Thread-safe: workers push, the UI copies a snapshot."""

    def __init__(self, size: int = 60) -> None:
        if size < 1:
            raise ValueError("window size must be >= 1")
        self._values: deque[float] = deque(maxlen=size)
        self._lock = threading.Lock()

    def push(self, value: float) -> None:
        with self._lock:
            self._values.append(value)

    def extend(self, values: list[float]) -> None:
        with self._lock:
            self._values.extend(values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def snapshot(self) -> list[float]:
        with self._lock:
            return list(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def last(self) -> float | None:
        with self._lock:
            return self._values[-1] if self._values else None

    def percentile(self, q: float) -> float | None:
        values = self.snapshot()
        return percentile(values, q) if values else None
