"""CounterWindow: an engine's monotonic counters over the reads of the last N seconds.

Each read adds a snapshot ``{name: value}`` of the counters it saw (values already
checked: finite, not negative). A rate over the window is the difference between the
newest snapshot and the oldest one kept (at most ``span_s`` seconds older), so a panel
read once a second still shows, say, preemptions per minute. When any counter is lower
than in the snapshot before (the engine restarted, or a counter was reset), the older
snapshots are dropped: the window restarts at that read, and a difference is never
negative. Bounded: at most ``max_reads`` snapshots, each of the names the caller gives.
"""

from __future__ import annotations

from collections import deque


class CounterWindow:
    def __init__(self, span_s: float = 60.0, max_reads: int = 600) -> None:
        self.span_s = span_s
        self.reads: deque[tuple[float, dict[str, float]]] = deque(maxlen=max_reads)
        self.restarted = False  # the last add found a counter gone back

    def add(self, t: float, values: dict[str, float]) -> None:
        """One read at ``t`` (monotonic seconds). Counters absent from a read are
        absent from its snapshot (their differences are None until both ends have them)."""
        last = self.reads[-1][1] if self.reads else None
        self.restarted = last is not None and any(
            name in last and v < last[name] for name, v in values.items()
        )
        if self.restarted:
            self.reads.clear()
        self.reads.append((t, dict(values)))
        while len(self.reads) > 2 and t - self.reads[1][0] >= self.span_s:
            self.reads.popleft()  # keep the oldest read at most span_s old (two at least)

    @property
    def seconds(self) -> float | None:
        """The span between the oldest and newest read kept (None with fewer than two)."""
        if len(self.reads) < 2:
            return None
        return self.reads[-1][0] - self.reads[0][0]

    def delta(self, name: str) -> float | None:
        """Newest − oldest of ``name`` (None with one read, or where either lacks it)."""
        if len(self.reads) < 2:
            return None
        a, b = self.reads[0][1].get(name), self.reads[-1][1].get(name)
        if a is None or b is None:
            return None
        return b - a

    def per_minute(self, name: str) -> float | None:
        d, s = self.delta(name), self.seconds
        if d is None or not s:
            return None
        return d / s * 60.0

    def ratio(self, num: str, den: str) -> float | None:
        """Δnum ÷ Δden over the window (None when Δden is 0 or unknown)."""
        n, d = self.delta(num), self.delta(den)
        if n is None or d is None or d <= 0:
            return None
        return n / d

    def first(self) -> dict[str, float] | None:
        return self.reads[0][1] if len(self.reads) >= 2 else None
