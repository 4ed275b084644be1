"""The device's energy into the ledger, span by span, for busy time's joules.

Where a hardware source gives energy (an energy counter, or power to integrate:
tui/core/energy.py), an :class:`EnergyFeed` closes a span every ``every_s`` seconds:
the energy of ``[last end, the newest reading]`` — the device's, idle power included —
written as one :class:`~tui.ledger.writer.EnergySpan` for the upstream the device serves.
``usage`` then splits each span's energy among the requests in flight, as busy time
(tui/core/attribution.py); energy while nothing was in flight is given to no one. No
source, or a source with no energy reading: no span, and no joules are shown — never an
estimate from anything else.

The feed asks two things of the source, so it needs nothing of tui/telemetry:
``latest()`` (the monotonic time of its newest reading) and ``window(t0, t1)`` (the
joules of that monotonic window and how they were found, or None).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

from tui.ledger.writer import EnergySpan

EVERY_S: Final = 10.0
MIN_SPAN_S: Final = 1.0


class EnergyFeed:
    """A thread that writes a span of the device's energy every ``every_s`` (see the
    module docstring); ``upstream()``: the upstream the device serves now (None: none)."""

    def __init__(
        self,
        sink: Any,
        upstream: Callable[[], str | None],
        window: Callable[[float, float], tuple[float, str] | None],
        latest: Callable[[], float | None],
        every_s: float = EVERY_S,
    ) -> None:
        self.sink, self.upstream, self.window, self.latest = sink, upstream, window, latest
        self.every_s = every_s
        self.spans = 0
        self._last: float | None = None
        # monotonic → wall clock, taken once: consecutive spans stay end to start
        self._offset = time.time() - time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="infertop-energy", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.close_span()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.close_span()
            except Exception:  # noqa: BLE001 - an energy reading is not worth a crash
                pass

    def close_span(self) -> None:
        """Write the span since the last one, up to the newest reading."""
        t1 = self.latest()
        if t1 is None:
            return
        t0 = self._last
        if t0 is None:
            self._last = t1  # the first reading: spans start here
            return
        if t1 - t0 < MIN_SPAN_S:
            return
        self._last = t1
        upstream = self.upstream()
        found = self.window(t0, t1)
        if upstream is None or found is None:
            return
        joules, how = found
        offset = self._offset
        self.sink.energy(EnergySpan(upstream, t0 + offset, t1 + offset, joules, how))
        self.spans += 1


def track_window(track: Any) -> Callable[[float, float], tuple[float, str] | None]:
    """``window`` for an EnergyTrack (tui/telemetry/energy_track.py): its joules over
    the domains measured, and which they were."""

    def window(t0: float, t1: float) -> tuple[float, str] | None:
        use = track.window(t0, t1, None)
        if use is None or use.joules is None:
            return None
        return float(use.joules), "; ".join(f"{d.domain}: {d.label()}" for d in use.measured)

    return window
