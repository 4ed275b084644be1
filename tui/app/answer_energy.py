"""The energy of chat answers: each finished answer waits for a hardware reading taken
after its end, then its summary line gets its J/token (definition: tui/core/energy.py).

The window is the answer's E2E window (request sent → stream end, ``perf_counter_ns``
stamps); the readings are the sampler's (tui/telemetry/energy_track.py). An answer whose
window is not closed by a reading within :data:`WAIT_S` (the link was lost, the source
stopped) gets none.
"""

from __future__ import annotations

import time
from typing import Protocol

from tui.core.timeline import RequestTimeline
from tui.telemetry.energy_track import EnergyTrack, monotonic_from_perf_ns

WAIT_S = 10.0


class Summarised(Protocol):
    def add_to_summary(self, text: str) -> None: ...


class AnswerEnergy:
    """Answers waiting for their energy: ``expect`` when one ends, ``settle`` per sample."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Summarised, int, int, int, float]] = []

    def expect(self, turn: Summarised, tl: RequestTimeline, tokens: int | None) -> None:
        if tl.t_sent_ns is None or tl.t_end_ns is None or not tokens:
            return
        self.waiting.append((turn, tl.t_sent_ns, tl.t_end_ns, tokens, time.monotonic()))

    def settle(self, track: EnergyTrack) -> None:
        """Give each answer whose window a reading has closed its J/token."""
        still = []
        for item in self.waiting:
            turn, t0_ns, t1_ns, tokens, since = item
            if track.covers(monotonic_from_perf_ns(t1_ns)):
                use = track.window_ns(t0_ns, t1_ns, tokens)
                if use is not None and use.j_per_token is not None:
                    turn.add_to_summary(use.short())
            elif time.monotonic() - since < WAIT_S:
                still.append(item)
        self.waiting = still
