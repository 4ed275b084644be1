"""llama-server's inside: /metrics (with ``--metrics``), /slots and /props.

Read from /metrics (``llamacpp:`` names): ``requests_processing`` and
``requests_deferred`` (gauges: requests working now, requests waiting for a slot),
``n_tokens_max`` (the longest sequence, prompt + answer, any slot has held: the context
high-water mark), ``n_busy_slots_per_decode`` (a gauge: busy slots per decode call,
averaged since the previous scrape), ``prompt_tokens_total`` (prompt tokens computed)
and ``prompt_tokens_cached_total`` (reused from the cache) for the prefix-cache hit rate,
and the ``spec_decode_*`` counters (tui/core/spec.py). From /slots, each slot's
``n_ctx``, ``is_processing``, ``n_prompt_tokens``, ``n_prompt_tokens_cache``,
``speculative`` and ``next_token[0].n_decoded``; from /props, ``total_slots`` (once).
/slots may be off (``--no-slots``): the panel then says so and counts nothing per slot.
"""

from __future__ import annotations

from typing import Any

from tui.core.counter_window import CounterWindow
from tui.core.inside import SLOTS_KEPT, EngineInside, SlotState
from tui.core.spec import count
from tui.engines.inside.values import spec_counts, spec_values, spec_window, value
from tui.transport.prometheus import Scrape

P = "llamacpp:"
COMPUTED = P + "prompt_tokens_total"
CACHED = P + "prompt_tokens_cached_total"


def _whole(v: object) -> int | None:
    c = count(v)
    return None if c is None or c >= 2**53 else int(c)


def _first(scrape: Scrape, *names: str) -> float | None:
    """The first of ``names`` the scrape has (a counter without ``_total`` in its TYPE
    line is read back with ``_total`` added by the parser)."""
    for name in names:
        v = value(scrape, name)
        if v is not None:
            return v
    return None


def parse_slots(data: object) -> tuple[tuple[SlotState, ...], int, int]:
    """(the first SLOTS_KEPT slots, how many slots are busy, how many entries in all)
    from /slots' list; linear in its length, whatever each entry holds."""
    if not isinstance(data, list):
        return (), 0, 0
    kept: list[SlotState] = []
    busy = 0
    for i, s in enumerate(data):
        if not isinstance(s, dict):
            continue
        working = s.get("is_processing") is True
        busy += working
        if len(kept) >= SLOTS_KEPT:
            continue
        nxt = s.get("next_token")
        first: Any = nxt[0] if isinstance(nxt, list) and nxt else nxt
        decoded = _whole(first.get("n_decoded")) if isinstance(first, dict) else None
        spec = s.get("speculative")
        sid = _whole(s.get("id"))
        kept.append(
            SlotState(
                id=sid if sid is not None else i,
                n_ctx=_whole(s.get("n_ctx")),
                busy=working,
                n_prompt=_whole(s.get("n_prompt_tokens", s.get("n_past"))),
                n_cached=_whole(s.get("n_prompt_tokens_cache")),
                n_decoded=decoded if working else None,
                speculative=spec if isinstance(spec, bool) else None,
            )
        )
    return tuple(kept), busy, len(data)


def read_llama_server(
    t: float,
    scrape: Scrape,
    slots: object,
    total_slots: int | None,
    window: CounterWindow,
    notes: tuple[str, ...] = (),
) -> EngineInside:
    """One read: ``scrape`` of /metrics, ``slots`` as /slots gave it (None: not read),
    ``total_slots`` from /props; ``window`` holds the earlier reads' counters."""
    spec = spec_counts(scrape, P + "spec_decode")
    counters = {
        k: v
        for k, v in (("computed", value(scrape, COMPUTED)), ("cached", value(scrape, CACHED)))
        if v is not None
    }
    counters.update(spec_values(spec))
    window.add(t, counters)
    kept, busy, n = parse_slots(slots)
    hit_total = None
    computed, cached = counters.get("computed"), counters.get("cached")
    if computed is not None and cached is not None and computed + cached > 0:
        hit_total = cached / (computed + cached)
    d_comp, d_cache = window.delta("computed"), window.delta("cached")
    hit = tokens = None
    if d_comp is not None and d_cache is not None and d_comp + d_cache > 0:
        tokens = d_comp + d_cache
        hit = d_cache / tokens
    return EngineInside(
        kind="llama-server",
        t=t,
        running=value(scrape, P + "requests_processing"),
        waiting=value(scrape, P + "requests_deferred"),
        slots_total=total_slots if total_slots is not None else (n or None),
        slots_busy=busy if slots is not None else None,
        slots=kept,
        slots_unlisted=max(0, n - len(kept)),
        ctx_high_water=_first(scrape, P + "n_tokens_max_total", P + "n_tokens_max"),
        busy_per_decode=value(scrape, P + "n_busy_slots_per_decode"),
        prefix_hit_rate=hit,
        prefix_tokens=tokens,
        prefix_hit_rate_total=hit_total,
        spec_window=spec_window(window.first(), spec),
        spec_total=spec,
        restarted=window.restarted,
        window_s=window.seconds,
        notes=notes,
    )
