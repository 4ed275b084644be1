"""Each bench request's verdict (tui/core/verdict.py), and speculative decoding per level.

What the bench saw around a request is read from the records themselves, after the run:
the other requests of the same engine in flight when it was sent, and the most at once
while it ran (their ``RequestSent`` and end stamps: every worker process stamps on the
one system-wide monotonic clock), the engine's slots (llama-server's /props
``total_slots``, in the engine's info) and, where the run measured the same engine
without speculation (``--compare-spec`` / ``--sweep spec_type=none,…``: an engine whose
spec differs only in ``spec_type``), that engine's median decode tok/s at the same
level: a speculating request decoding slower than that is "spec-slower".

Speculation per level (:func:`spec_levels`): Σ drafted and Σ accepted over the level's
ok requests (llama-server ``timings.draft_n`` / ``draft_n_accepted``; vLLM's per-request
acceptance histogram), the acceptance rate Σaccepted ÷ Σdrafted, the mean acceptance
length 1 + Σaccepted ÷ Σdrafts where the engine counts drafts (vLLM), the median decode
tok/s, and the speed-up over the no-speculation twin's median at that level.
"""

from __future__ import annotations

import bisect
import statistics
from typing import Any

from tui.bench.run.records import RequestRecord
from tui.core.spec import SpecCounts, from_timings, total
from tui.core.verdict import Seen, Verdict, judge


def overlaps(records: list[RequestRecord]) -> dict[int, tuple[int, int]]:
    """id(record) → (others in flight at its send, the most at once while it ran)."""
    spans = []
    for r in records:
        t0, t1 = r.timeline.t_sent_ns, r.timeline.t_end_ns
        if t0 is not None:
            spans.append((t0, t1 if t1 is not None else t0, r))
    starts = sorted(s for s, _, _ in spans)
    ends = sorted(e for _, e, _ in spans)
    events = sorted([(s, 1) for s, _, _ in spans] + [(e, -1) for _, e, _ in spans])
    running: list[int] = []  # in flight just after each event
    now = 0
    for _, step in events:
        now += step
        running.append(now)
    times = [t for t, _ in events]
    out: dict[int, tuple[int, int]] = {}
    for s, e, r in spans:
        at_send = bisect.bisect_right(starts, s) - bisect.bisect_right(ends, s) - 1
        lo, hi = bisect.bisect_right(times, s), bisect.bisect_left(times, e)
        most = max(running[lo:hi], default=at_send + 1) - 1
        out[id(r)] = (max(0, at_send), max(0, most, at_send))
    return out


def _slots(info: dict[str, Any]) -> int | None:
    params = info.get("parameters") if isinstance(info, dict) else None
    n = params.get("total_slots") if isinstance(params, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _state(r: RequestRecord) -> Any:
    return {"ok": "done", "cancelled": "cancelled"}.get(r.status, "failed")


def verdicts(
    records: list[RequestRecord], info: dict[str, Any], baseline: dict[str, float] | None = None
) -> dict[int, Verdict]:
    """id(record) → its verdict, for one engine's records (``baseline``: level label →
    the no-speculation twin's median decode tok/s)."""
    seen_around = overlaps([r for r in records if r.phase in ("cold", "warm")])
    slots = _slots(info)
    out: dict[int, Verdict] = {}
    for r in records:
        at_send, most = seen_around.get(id(r), (0, 0))
        base = (baseline or {}).get(r.level)
        seen = Seen(at_send, most, slots, spec_baseline_tps=base)
        out[id(r)] = judge(r.metrics, r.timeline.truth, seen, _state(r))
    return out


def request_spec(r: RequestRecord) -> SpecCounts | None:
    truth = r.timeline.truth
    if truth is None:
        return None
    c = from_timings(truth.raw)
    drafts = truth.raw.get("spec_drafts")
    if c is not None and isinstance(drafts, int | float) and not isinstance(drafts, bool):
        c = SpecCounts(c.drafted, c.accepted, float(drafts))
    return c


def median_decode(records: list[RequestRecord], level: str) -> float | None:
    values = [
        r.metrics.decode_tps
        for r in records
        if r.level == level and r.ok and r.phase == "warm" and r.metrics.decode_tps is not None
    ]
    return statistics.median(values) if values else None


def spec_levels(
    records: list[RequestRecord], baseline: dict[str, float] | None = None
) -> list[dict[str, Any]]:
    """Speculation per warm level (see the module docstring); [] when nothing drafted."""
    levels: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.phase == "warm" and r.ok:
            levels.setdefault(r.level, []).append(r)
    out = []
    for label, recs in levels.items():
        counts = total([c for r in recs if (c := request_spec(r)) is not None])
        if counts is None:
            continue
        tps = median_decode(recs, label)
        base = (baseline or {}).get(label)
        out.append(
            {
                "level": label,
                "requests": len(recs),
                "drafted": counts.drafted,
                "accepted": counts.accepted,
                "acceptance": counts.acceptance,
                "mean_length": counts.mean_length,
                "decode_tps": tps,
                "baseline_tps": base,
                "speedup": None if tps is None or not base else tps / base,
            }
        )
    return out


def twin_baselines(runs: list[Any]) -> dict[str, dict[str, float]]:
    """Engine name → (level → median decode tok/s of its no-speculation twin): the
    engine in the same run whose spec is the same but for ``spec_type`` "none" (or no
    spec_type at all)."""

    def without_spec(spec: dict[str, Any]) -> tuple[Any, ...]:
        options = dict(spec.get("options") or {})
        options.pop("spec_type", None)
        rest = {k: v for k, v in spec.items() if k not in ("name", "options")}
        return (repr(sorted(rest.items())), repr(sorted(options.items())))

    def spec_type(spec: dict[str, Any]) -> str:
        v = (spec.get("options") or {}).get("spec_type")
        return v if isinstance(v, str) else "none"

    out: dict[str, dict[str, float]] = {}
    plain = {without_spec(run.spec): run for run in runs if spec_type(run.spec) == "none"}
    for run in runs:
        if spec_type(run.spec) == "none":
            continue
        twin = plain.get(without_spec(run.spec))
        if twin is None:
            continue
        recs = twin.records()
        labels = {r.level for r in recs if r.phase == "warm"}
        out[run.name] = {
            label: m for label in labels if (m := median_decode(recs, label)) is not None
        }
    return out
