"""Speculative decoding, counted: what a draft proposed and what the target model kept.

The counts, as llama-server and vLLM publish them (per request: llama-server's
``timings.draft_n`` / ``draft_n_accepted``; live: each engine's ``spec_decode_*``
counters on /metrics):

- drafted D: draft tokens proposed (``draft_n``; ``…num_draft_tokens_total``);
- accepted A: of those, the tokens the target model accepted (``draft_n_accepted``;
  ``…num_accepted_tokens_total``);
- drafts K: drafts verified, one target step each (``…num_drafts_total``; a request's
  timings do not carry it);
- accepted at position i: drafts whose i-th token was accepted
  (``…num_accepted_tokens_per_pos_total{position="i"}``, i from 0).

From them:

- acceptance rate = A / D (the share of drafted tokens that were kept);
- mean acceptance length = 1 + A / K: the tokens one target step produced on average —
  the accepted draft tokens plus the one token the target always adds (needs K);
- acceptance at position i = accepted_i / K: the share of drafts that got that far.

Counts are never negative and never NaN here: :func:`count` turns such a value into
None (the engine said nothing usable), and a window across a counter that went back
(the engine restarted) is the count since the restart (:meth:`SpecCounts.since`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

POSITIONS_KEPT = 32  # draft positions kept (a draft is rarely longer than 16)


def count(value: object) -> float | None:
    """A counter's value as a float, or None when it is no count: not a number, NaN,
    infinite or negative (a bool is no number either)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    if math.isnan(v) or math.isinf(v) or v < 0:
        return None
    return v


@dataclass(frozen=True, slots=True)
class SpecCounts:
    """Drafted, accepted and (where known) drafts and per-position acceptances, over
    one request or one window of an engine's counters (see the module docstring)."""

    drafted: float
    accepted: float
    drafts: float | None = None
    per_position: tuple[float, ...] = ()

    @property
    def acceptance(self) -> float | None:
        """A / D (None when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted > 0 else None

    @property
    def mean_length(self) -> float | None:
        """1 + A / K (None without K, or when no draft was verified)."""
        if self.drafts is None or self.drafts <= 0:
            return None
        return 1.0 + self.accepted / self.drafts

    @property
    def position_rates(self) -> tuple[float, ...]:
        """accepted_i / K for each position i (empty without K)."""
        if self.drafts is None or self.drafts <= 0:
            return ()
        return tuple(a / self.drafts for a in self.per_position)

    def since(self, earlier: SpecCounts) -> SpecCounts:
        """The counts between ``earlier`` and these. A count that went back means the
        engine restarted: then the window is these counts themselves (counted from the
        restart), never a negative difference."""
        went_back = (
            self.drafted < earlier.drafted
            or self.accepted < earlier.accepted
            or (
                self.drafts is not None
                and earlier.drafts is not None
                and self.drafts < earlier.drafts
            )
            or any(a < b for a, b in zip(self.per_position, earlier.per_position))
        )
        if went_back:
            return self
        drafts = None
        if self.drafts is not None and earlier.drafts is not None:
            drafts = self.drafts - earlier.drafts
        per = tuple(
            a - (earlier.per_position[i] if i < len(earlier.per_position) else 0.0)
            for i, a in enumerate(self.per_position)
        )
        return SpecCounts(
            self.drafted - earlier.drafted, self.accepted - earlier.accepted, drafts, per
        )

    def plus(self, other: SpecCounts) -> SpecCounts:
        """The sum of two disjoint counts (Σ over requests)."""
        drafts = None
        if self.drafts is not None and other.drafts is not None:
            drafts = self.drafts + other.drafts
        n = max(len(self.per_position), len(other.per_position))
        per = tuple(
            (self.per_position[i] if i < len(self.per_position) else 0.0)
            + (other.per_position[i] if i < len(other.per_position) else 0.0)
            for i in range(n)
        )
        return SpecCounts(self.drafted + other.drafted, self.accepted + other.accepted, drafts, per)

    def to_dict(self) -> dict[str, Any]:
        return {
            "drafted": self.drafted,
            "accepted": self.accepted,
            "drafts": self.drafts,
            "per_position": list(self.per_position),
            "acceptance": self.acceptance,
            "mean_length": self.mean_length,
        }

    @classmethod
    def from_dict(cls, d: object) -> SpecCounts | None:
        """Back from :meth:`to_dict` (untrusted: None when it is not one)."""
        if not isinstance(d, dict):
            return None
        drafted, accepted = count(d.get("drafted")), count(d.get("accepted"))
        if drafted is None or accepted is None:
            return None
        per_raw = d.get("per_position")
        per: list[float] = []
        if isinstance(per_raw, list):
            for v in per_raw[:POSITIONS_KEPT]:
                c = count(v)
                if c is None:
                    break
                per.append(c)
        return cls(drafted, accepted, count(d.get("drafts")), tuple(per))


def from_timings(raw: object) -> SpecCounts | None:
    """One request's counts from llama-server's ``timings`` (or an engine report's raw
    fields): ``draft_n`` and ``draft_n_accepted``; None when the request drafted nothing
    or the fields are missing or not counts (accepted above drafted is no count either)."""
    if not isinstance(raw, dict):
        return None
    drafted, accepted = count(raw.get("draft_n")), count(raw.get("draft_n_accepted"))
    if drafted is None or accepted is None or drafted <= 0 or accepted > drafted:
        return None
    return SpecCounts(drafted, accepted)


def total(counts: list[SpecCounts]) -> SpecCounts | None:
    """Σ over requests (None for none)."""
    out: SpecCounts | None = None
    for c in counts:
        out = c if out is None else out.plus(c)
    return out


def pct(rate: float | None) -> str:
    """A rate in 0..1 as "31 %" ("–" for None); the one way panels and verdicts write it."""
    return "–" if rate is None else f"{100 * rate:.0f} %"
