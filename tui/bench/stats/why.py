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

import statistics
from typing import Any

from tui.bench.run.records import RequestRecord
from tui.core.spec import SpecCounts, from_timings, total
from tui.core.verdict import Seen, Verdict, judge


def overlaps(records: list[RequestRecord]) -> dict[int, tuple[int, int]]:
    """id(record) → (others in flight at its send, the most decoding beside its decode
    at once: tui/core/overlap.py's definitions), by two sweeps over the sorted sends
    and ends: the cost is the records times the requests in flight at once."""
    sends: list[tuple[int, int, int]] = []  # (t, 0 end | 1 start, record id)
    decodes: list[tuple[int, int, int]] = []
    for r in records:
        t0, t1 = r.timeline.t_sent_ns, r.timeline.t_end_ns
        if t0 is None:
            continue
        end = t1 if t1 is not None else t0
        if end > t0:
            sends += [(t0, 1, id(r)), (end, 0, id(r))]
        ttft = r.metrics.ttft_ms
        first = t0 + int(ttft * 1e6) if ttft is not None else None
        if first is not None and end > first:
            decodes += [(first, 1, id(r)), (end, 0, id(r))]
    at_send: dict[int, int] = {}
    active: set[int] = set()
    for _, start, k in sorted(sends):  # an end before a start at the same instant
        if start:
            at_send[k] = len(active)
            active.add(k)
        else:
            active.discard(k)
    beside: dict[int, int] = {}
    active.clear()
    for _, start, k in sorted(decodes):
        if start:
            active.add(k)
            n = len(active) - 1
            for j in active:
                beside[j] = max(beside.get(j, 0), n)
        else:
            active.discard(k)
    return {id(r): (at_send.get(id(r), 0), beside.get(id(r), 0)) for r in records}


def _slots(info: dict[str, Any]) -> int | None:
    params = info.get("parameters") if isinstance(info, dict) else None
    n = params.get("total_slots") if isinstance(params, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _state(r: RequestRecord) -> Any:
    """How the request ended, for its verdict: as its outcome says (a request the bench
    cut at a level's limit is cancelled there too: tui/bench/run/records.record_outcome)."""
    return {"ok": "done", "cancelled": "cancelled", "cut": "cancelled"}.get(r.status, "failed")


def verdicts(
    records: list[RequestRecord], info: dict[str, Any], baseline: dict[str, float] | None = None
) -> dict[int, Verdict]:
    """id(record) → its verdict, for one engine's records (``baseline``: level label →
    the no-speculation twin's median decode tok/s). A record that has its verdict already
    keeps it: the bench gives each its verdict once, when its level ends, by this same
    function over the level's records, and publishes it with the request's outcome
    (tui/bench/run/published.py); the report reads that one, so the two cannot differ.
    Levels run one after another, so a level's overlaps are the ones the whole engine's
    records give it."""
    out: dict[int, Verdict] = {id(r): r.verdict for r in records if r.verdict is not None}
    if len(out) == len(records):
        return out
    seen_around = overlaps([r for r in records if r.phase in ("cold", "warm")])
    slots = _slots(info)
    for r in records:
        if id(r) in out:
            continue
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


def without_spec(spec: dict[str, Any]) -> tuple[Any, ...]:
    """An engine's spec (as the report keeps it) less its name and ``spec_type``: two
    engines with the same key are twins but for speculation."""
    options = dict(spec.get("options") or {})
    options.pop("spec_type", None)
    rest = {k: v for k, v in spec.items() if k not in ("name", "options")}
    return (repr(sorted(rest.items())), repr(sorted(options.items())))


def spec_type(spec: dict[str, Any]) -> str:
    """The spec's ``options.spec_type``, "none" where it has none."""
    v = (spec.get("options") or {}).get("spec_type")
    return v if isinstance(v, str) else "none"


def twin_baselines(runs: list[Any]) -> dict[str, dict[str, float]]:
    """Engine name → (level → median decode tok/s of its no-speculation twin): the
    engine in the same run whose spec is the same but for ``spec_type`` "none" (or no
    spec_type at all)."""
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
