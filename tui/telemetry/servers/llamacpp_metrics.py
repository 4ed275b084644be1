"""llama-server's /metrics, /slots and /props.

llama-server's gauges (e.g. ``llamacpp:prompt_tokens_seconds``) are averages that reset
when scraped, so they are not used. Speeds come from its monotonic ``*_total`` counters
between two scrapes:

- prefill tok/s = Δprompt_tokens_total / Δprompt_seconds_total (the engine's own time
  spent on prompts in the window);
- decode tok/s = Δtokens_predicted_total / Δtokens_predicted_seconds_total (the counters
  add N tokens and predicted_ms per request, so for one request this is N / predicted_ms,
  a little above the per-request (N − 1) / predicted_ms);
- generated tok/s (wall) = Δtokens_predicted_total / Δt between scrapes.
/slots (when the server allows it) says which slots are busy; /props gives total_slots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.transport.access import HttpAccess
from tui.transport.prometheus import Scrape, ScrapeError, counter_delta, fetch, get_text
from tui.transport.whole import json_body

PROMPT_TOKENS = "llamacpp:prompt_tokens_total"
PROMPT_SECONDS = "llamacpp:prompt_seconds_total"
PREDICTED_TOKENS = "llamacpp:tokens_predicted_total"
PREDICTED_SECONDS = "llamacpp:tokens_predicted_seconds_total"


@dataclass
class LlamaServerSample:
    t: float
    requests_processing: float | None
    requests_deferred: float | None
    prompt_tokens_total: float | None
    predicted_tokens_total: float | None
    prefill_tps: float | None = None
    decode_tps: float | None = None
    generated_tps_wall: float | None = None
    total_slots: int | None = None
    busy_slots: int | None = None
    slots: list[dict[str, Any]] = field(default_factory=list)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def summarize(prev: Scrape | None, cur: Scrape) -> LlamaServerSample:
    s = LlamaServerSample(
        t=cur.t,
        requests_processing=cur.total("llamacpp:requests_processing"),
        requests_deferred=cur.total("llamacpp:requests_deferred"),
        prompt_tokens_total=cur.total(PROMPT_TOKENS),
        predicted_tokens_total=cur.total(PREDICTED_TOKENS),
    )
    if prev is not None:
        dp = counter_delta(prev, cur, PROMPT_TOKENS)
        s.prefill_tps = _ratio(dp, counter_delta(prev, cur, PROMPT_SECONDS))
        dg = counter_delta(prev, cur, PREDICTED_TOKENS)
        s.decode_tps = _ratio(dg, counter_delta(prev, cur, PREDICTED_SECONDS))
        s.generated_tps_wall = _ratio(dg, cur.t - prev.t)
    return s


def total_slots(
    base_url: str, timeout_s: float = 2.0, access: HttpAccess | None = None
) -> int | None:
    """/props total_slots (None when the server does not say)."""
    props = json_body(get_text(base_url.rstrip("/") + "/props", timeout_s, access).encode())
    n = props.get("total_slots") if isinstance(props, dict) else None
    return int(n) if isinstance(n, int) else None


class LlamaServerMetrics:
    """Scrapes /metrics (needs ``--metrics``), /slots and /props of one llama-server."""

    def __init__(
        self, base_url: str, timeout_s: float = 2.0, access: HttpAccess | None = None
    ) -> None:
        self.base = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.access = access
        self.previous: Scrape | None = None
        self._total_slots: int | None = None

    def sample(self) -> LlamaServerSample:
        cur = fetch(self.base + "/metrics", self.timeout_s, self.access)
        out = summarize(self.previous, cur)
        self.previous = cur
        if self._total_slots is None:
            try:
                self._total_slots = total_slots(self.base, self.timeout_s, self.access)
            except (ScrapeError, ValueError):
                pass
        out.total_slots = self._total_slots
        try:
            slots = json_body(get_text(self.base + "/slots", self.timeout_s, self.access).encode())
        except (ScrapeError, ValueError):
            slots = None  # /slots can be disabled (--no-slots)
        if isinstance(slots, list):
            out.slots = [s for s in slots if isinstance(s, dict)]
            out.busy_slots = sum(1 for s in out.slots if s.get("is_processing"))
        return out
