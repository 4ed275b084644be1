"""Numbers out of one scrape, checked: a sample that is NaN, infinite or negative is no
number here (an engine's counters and gauges are never negative), so a hostile or
broken /metrics gives "not said", never a negative rate or a NaN on a panel."""

from __future__ import annotations

from tui.core.spec import POSITIONS_KEPT, SpecCounts, count
from tui.transport.prometheus import Scrape

LABEL_VALUES_KEPT = 16


def _matches(labels: tuple[tuple[str, str], ...], match: dict[str, str]) -> bool:
    d = dict(labels)
    return all(d.get(k) == v for k, v in match.items())


def value(scrape: Scrape, name: str, **match: str) -> float | None:
    """Σ of ``name`` over its label sets that contain ``match`` (bad samples skipped);
    None when the scrape has no good sample of it."""
    series = scrape.samples.get(name)
    if not series:
        return None
    good = [c for lab, v in series.items() if _matches(lab, match) and (c := count(v)) is not None]
    return sum(good) if good else None


def mean(scrape: Scrape, name: str) -> float | None:
    """The mean of ``name`` over its label sets (one per engine or rank)."""
    series = scrape.samples.get(name)
    if not series:
        return None
    good = [c for v in series.values() if (c := count(v)) is not None]
    return sum(good) / len(good) if good else None


def by_label(scrape: Scrape, name: str, label: str) -> dict[str, float]:
    """``name`` summed per value of ``label`` (at most LABEL_VALUES_KEPT values)."""
    out: dict[str, float] = {}
    for lab, v in scrape.samples.get(name, {}).items():
        key = dict(lab).get(label)
        c = count(v)
        if key is None or c is None:
            continue
        if key not in out and len(out) >= LABEL_VALUES_KEPT:
            continue
        out[key[:40]] = out.get(key[:40], 0.0) + c
    return out


def spec_counts(scrape: Scrape, prefix: str) -> SpecCounts | None:
    """The speculative-decoding counters ``PREFIX_num_draft_tokens_total``,
    ``_num_accepted_tokens_total``, ``_num_drafts_total`` and
    ``_num_accepted_tokens_per_pos_total{position}`` (llama-server's and vLLM's names);
    None when the engine publishes none (it drafts nothing)."""
    drafted = value(scrape, prefix + "_num_draft_tokens_total")
    accepted = value(scrape, prefix + "_num_accepted_tokens_total")
    if drafted is None or accepted is None:
        return None
    per: dict[int, float] = {}
    for pos, v in by_label(
        scrape, prefix + "_num_accepted_tokens_per_pos_total", "position"
    ).items():
        if pos.isdigit() and int(pos) < POSITIONS_KEPT:
            per[int(pos)] = v
    positions = tuple(per.get(i, 0.0) for i in range(max(per) + 1)) if per else ()
    return SpecCounts(drafted, accepted, value(scrape, prefix + "_num_drafts_total"), positions)


def spec_values(counts: SpecCounts | None) -> dict[str, float]:
    """The counts as window names (tui/core/counter_window.py)."""
    if counts is None:
        return {}
    out = {"spec_drafted": counts.drafted, "spec_accepted": counts.accepted}
    if counts.drafts is not None:
        out["spec_drafts"] = counts.drafts
    for i, a in enumerate(counts.per_position):
        out[f"spec_pos_{i}"] = a
    return out


def spec_window(first: dict[str, float] | None, now: SpecCounts | None) -> SpecCounts | None:
    """The counts between the window's oldest read and ``now`` (None without both)."""
    if first is None or now is None or "spec_drafted" not in first:
        return None
    n = len(now.per_position)
    earlier = SpecCounts(
        first["spec_drafted"],
        first.get("spec_accepted", 0.0),
        first.get("spec_drafts"),
        tuple(first.get(f"spec_pos_{i}", 0.0) for i in range(n)),
    )
    return now.since(earlier)
