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


def test_the_proxy_rows_and_the_chat_panes_count_alike():
    """One set of live numbers (LiveCounts): a proxied request's row and a chat pane's
    snapshot of the same stamped chunks agree, reasoning and 0-token chunks included."""
    from tui.core.events import REASONING, TOOL
    from tui.proxy.record import ProxiedRequest

    ms = 1_000_000
    chunks = [
        TextChunk(10 * ms, "think", 1, REASONING),
        TextChunk(14 * ms, "ing", 2, REASONING),
        TextChunk(30 * ms, "f(", 1, TOOL),
        TextChunk(33 * ms, "{}", None, TOOL),
        TextChunk(33 * ms, ")", 0, TOOL),
    ]
    live = LiveRequest("r")
    live.add(RequestSent(0))
    rec = ProxiedRequest("p", "c", "POST", "/v1/chat/completions", "openai-chat", None, True, 0)
    rec.sent(0, "test")
    for c in chunks:
        live.add(TextChunk(c.t_ns, c.text, c.tokens, c.part))
        rec.emit(TextChunk(c.t_ns, c.text, c.tokens, c.part))
    snap, row = live.snapshot(), rec.row(now_ns=40 * ms)
    assert (snap.ttft_ms, snap.ttfo_ms) == (row.ttft_ms, row.ttfo_ms) == (10.0, 30.0)
    assert snap.tokens == row.output_tokens == 5 and snap.tokens_estimated and row.output_estimated
    assert snap.reasoning_tokens == row.reasoning_tokens == 3
    assert snap.decode_tps == row.tps == 4 / 0.023
    # per-token gaps: 4/2 ms twice, 16 ms, 3 ms; the 0-token ")" adds none
    assert snap.itl_recent == [2.0, 2.0, 16.0, 3.0]
    assert row.itl_p50_ms == 2.5
