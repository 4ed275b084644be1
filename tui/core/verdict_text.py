"""A request's breakdown in words (tui/core/verdict.py), one line, for every front end:
"queue 1.8 s (engine) · prefill 0.31 s: 3,904 computed + 96 cached · decode 2.10 s ·
transport 4 ms · drafts 59 of 64 accepted (92 %)". Parts the engine did not give are
left out, never guessed."""

from __future__ import annotations

from tui.core.spec import pct
from tui.core.verdict import Breakdown, seconds


def breakdown_line(b: Breakdown) -> str:
    parts: list[str] = []
    if b.queue_ms is not None:
        parts.append(f"queue {seconds(b.queue_ms)} ({b.queue_source or '?'})")
    if b.prefill_ms is not None or b.computed_tokens is not None:
        pre = "prefill" + (f" {seconds(b.prefill_ms)}" if b.prefill_ms is not None else "")
        if b.computed_tokens is not None:
            pre += f": {b.computed_tokens:,} computed + {b.cached_tokens or 0:,} cached"
        parts.append(pre)
    if b.decode_ms is not None:
        parts.append(f"decode {seconds(b.decode_ms)}")
    if b.transport_ms is not None:
        parts.append(f"transport {seconds(b.transport_ms)}")
    if b.drafted:
        parts.append(f"drafts {b.accepted or 0:,} of {b.drafted:,} accepted ({pct(b.acceptance)})")
    return " · ".join(parts) if parts else "no breakdown: the engine reported no timings"
