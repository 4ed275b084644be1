"""Requests beside one another: at a send, and decoding at once (tui/core/overlap.py);
the bench's sweep over its records gives the same answers."""

from __future__ import annotations

from types import SimpleNamespace

from tui.bench.stats.why import overlaps
from tui.core.overlap import covering, most_at_once


def test_covering_and_most_at_once() -> None:
    spans = [(0, 10), (5, 15), (12, 20), (30, 40)]
    assert covering(spans, 5) == 2 and covering(spans, 10) == 1 and covering(spans, 25) == 0
    assert most_at_once(spans, 0, 40) == 2
    assert most_at_once(spans, 15, 30) == 1  # (5, 15) ends where the window starts
    assert most_at_once(spans, 21, 29) == 0


def rec(t0: int, ttft_ms: float | None, t1: int) -> SimpleNamespace:
    return SimpleNamespace(
        timeline=SimpleNamespace(t_sent_ns=t0, t_end_ns=t1),
        metrics=SimpleNamespace(ttft_ms=ttft_ms),
    )


def test_a_request_that_waited_did_not_decode_beside_the_one_ahead() -> None:
    ms = 1_000_000
    a = rec(0, 10, 1000 * ms)  # decodes 10 ms → 1,000 ms
    b = rec(100 * ms, 950, 1500 * ms)  # sent at 100 ms, waited: first token at 1,050 ms
    c = rec(200 * ms, 20, 900 * ms)  # a third, decoding 220 → 900 ms beside a
    got = overlaps([a, b, c])  # type: ignore[arg-type]
    assert got[id(a)] == (0, 1)  # c decoded beside it; b only waited
    assert got[id(b)] == (1, 0)  # a was in flight at its send; nobody decoded beside it
    assert got[id(c)] == (2, 1)
