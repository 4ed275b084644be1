"""The energy readings of recent hardware samples, kept to answer afterwards how much
energy a window took (a chat answer, ``infertop run``'s request, a bench level).

Each fresh :class:`~tui.telemetry.sampler.TelemetrySample` gives one reading per domain
(:meth:`~tui.telemetry.sampler.TelemetrySample.energy_readings`): each GPU (its energy
counter and power, as its reader gives them) and each CPU domain (RAPL packages, macmon's
CPU power). The track asks a sample only for that (:class:`EnergySample`), so it needs
nothing of the sampler that feeds it. :meth:`EnergyTrack.window` applies the definitions
of tui/core/energy.py to the readings around the window. Samples are stamped with
``time.monotonic()`` (remote ones when they arrive); request windows are stamped with
``time.perf_counter_ns()``: :func:`monotonic_from_perf_ns` converts.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Protocol

from tui.core.energy import EnergyPoint, EnergyReading, EnergyUse, window_energy

KEEP = 7200  # readings: an hour at the default 2 Hz


class EnergySample(Protocol):
    """What the track needs of a hardware sample (a TelemetrySample is one)."""

    @property
    def t(self) -> float: ...  # time.monotonic() when taken

    @property
    def source(self) -> str: ...  # whose hardware

    def energy_readings(self) -> tuple[EnergyReading, ...]: ...


def monotonic_from_perf_ns(t_ns: int, offset: float | None = None) -> float:
    """A ``perf_counter_ns()`` stamp on ``time.monotonic()``'s clock (the same clock on
    Linux and macOS; the offset is taken now in case it is not). Stamps that must keep
    their distance (a window's two ends) share one ``offset``: two readings of it differ
    by however long this thread was held between its two clock reads."""
    if offset is None:
        offset = time.monotonic() - time.perf_counter()
    return t_ns / 1e9 + offset


class EnergyTrack:
    """Bounded history of energy readings; ``push`` from the sampler's thread, the rest
    from anywhere."""

    def __init__(self, keep: int = KEEP) -> None:
        self._lock = threading.Lock()
        self._rows: deque[tuple[float, tuple[EnergyReading, ...]]] = deque(maxlen=keep)
        self.source: str | None = None  # whose hardware (the samples' source)
        self.interval_s: float | None = None

    def push(self, sample: EnergySample) -> None:
        readings = sample.energy_readings()
        with self._lock:
            self.source = sample.source
            if readings:
                self._rows.append((sample.t, readings))

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()

    def latest_t(self) -> float | None:
        with self._lock:
            return self._rows[-1][0] if self._rows else None

    def covers(self, t1: float) -> bool:
        """Whether a reading at or after ``t1`` has arrived (the window can be closed)."""
        latest = self.latest_t()
        return latest is not None and latest >= t1

    def window(self, t0: float, t1: float, output_tokens: int | None) -> EnergyUse | None:
        """The energy of [t0, t1] (monotonic seconds) per domain; None when no sample had
        an energy or power reading at all (nothing to say)."""
        with self._lock:
            rows = list(self._rows)
        if not rows:
            return None
        meta: dict[str, EnergyReading] = {}
        points: dict[str, list[EnergyPoint]] = {}
        for t, readings in rows:
            for r in readings:
                meta[r.domain] = r
                points.setdefault(r.domain, []).append(EnergyPoint(t, r.joules, r.watts))
        return window_energy(((meta[d], points[d]) for d in meta), t0, t1, output_tokens)

    def window_ns(self, t0_ns: int, t1_ns: int, output_tokens: int | None) -> EnergyUse | None:
        """:meth:`window` for ``perf_counter_ns()`` stamps (a request's timeline)."""
        offset = time.monotonic() - time.perf_counter()  # one for both ends: t1 − t0 kept
        return self.window(
            monotonic_from_perf_ns(t0_ns, offset),
            monotonic_from_perf_ns(t1_ns, offset),
            output_tokens,
        )
