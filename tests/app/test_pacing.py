"""AppendPacer adapts the append interval to the calling thread's CPU share."""

from __future__ import annotations

import time

from tui.app.pacing import AppendPacer


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_busy_thread_slows_appends_idle_thread_speeds_them_up():
    pacer = AppendPacer(max_hz=30, budget=0.25, slowest_s=0.5)
    assert pacer.interval() == 1 / 30
    pacer._t0 -= 1.0  # pretend a second passed in which this thread ran flat out
    _spin(0.6)
    slow = pacer.interval()
    assert pacer.share is not None and pacer.share > 0.25
    assert slow == 2 / 30
    pacer._t0 -= 1.0
    pacer._c0 = time.thread_time()  # a second with no CPU used
    assert pacer.interval() == 1 / 30 and pacer.share < 0.125
