"""LiveRequest coalesces: one notification per batch until the UI drains it."""

from __future__ import annotations

import threading

from tui.core.events import Finished, RequestSent, TextChunk
from tui.core.live import LiveRequest


def test_one_pending_notification_per_batch_across_threads():
    calls = []
    live = LiveRequest("r", notify=lambda: calls.append(1))
    live.add(RequestSent(0))
    assert len(calls) == 1

    def produce():
        for i in range(1000):
            live.add(TextChunk(1_000_000 * (i + 1), "x", 1))

    t = threading.Thread(target=produce)
    t.start()
    t.join()
    assert len(calls) == 1  # nobody drained: no second message was posted
    assert live.drain() == "x" * 1000
    live.add(TextChunk(2_000_000_000, "y", 1))
    assert len(calls) == 2 and live.drain() == "y"
    snap = live.snapshot()
    assert snap.tokens == 1001 and snap.ttft_ms == 1.0
    assert snap.decode_tps is not None and abs(snap.last_itl_ms - 1000.0) < 1e-6
    live.add(Finished(2_000_000_001))
    assert live.snapshot().done
