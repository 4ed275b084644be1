"""How many other requests ran beside one: at its send, and decoding beside its decode.

Spans are ``(start, end)`` on one clock (``perf_counter_ns``), end exclusive. A request's
decode span runs from its first token to its end: two requests "decode beside each
other" where those spans overlap — a request that waited in a queue while another
decoded was not decoding beside it.
"""

from __future__ import annotations


def covering(spans: list[tuple[int, int]], t: int) -> int:
    """How many spans hold the instant ``t``."""
    return sum(1 for s, e in spans if s <= t < e)


def most_at_once(spans: list[tuple[int, int]], lo: int, hi: int) -> int:
    """The most spans holding one instant of [lo, hi) (0 when none reach it); linear
    in the spans after one sort."""
    events: list[tuple[int, int]] = []
    for s, e in spans:
        a, b = max(s, lo), min(e, hi)
        if a < b:
            events += [(a, 1), (b, -1)]
    events.sort()  # an end before a start at the same instant: (t, -1) < (t, 1)
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most
