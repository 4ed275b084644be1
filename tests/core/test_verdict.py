"""The breakdown and the verdict rules (tui/core/verdict.py), one rule at a time, from a
request's metrics and the engine's own account — and what it says when it has nothing."""

from __future__ import annotations

import pytest

from tui.core.events import EngineTruth
from tui.core.metrics import RequestMetrics
from tui.core.verdict import (
    VERDICT_KINDS,
    Breakdown,
    Seen,
    Verdict,
    breakdown,
    judge,
    verdict_from_dict,
)
from tui.core.verdict_text import breakdown_line


def m(
    ttft: float, e2e: float, out: int = 100, prompt: int | None = 100, **kw: object
) -> RequestMetrics:
    decode_ms = e2e - ttft
    return RequestMetrics(
        ttft_ms=ttft,
        ttfr_ms=ttft,
        e2e_ms=e2e,
        prompt_tokens=prompt,
        output_tokens=out,
        decode_ms=decode_ms,
        decode_tps=(out - 1) / (decode_ms / 1000) if decode_ms > 0 else None,
        **kw,  # type: ignore[arg-type]
    )


def llama(
    prompt_n: int, cache_n: int, prompt_ms: float, decode_ms: float, **raw: float
) -> EngineTruth:
    return EngineTruth(
        prompt_tokens=prompt_n + cache_n,
        prompt_eval_tokens=prompt_n,
        prompt_ms=prompt_ms,
        decode_ms=decode_ms,
        cached_tokens=cache_n,
        source="llama-server timings",
        raw={"prompt_n": prompt_n, "cache_n": cache_n, **raw},
    )


def test_queued_behind_a_busy_slot_names_the_slots() -> None:
    # TTFT 2,000 ms of which the engine spent 200 in prefill: 1.8 s before it, with one
    # other request in flight through this place when it was sent, on a -np 1 server
    v = judge(m(2000, 3000), llama(90, 10, 200, 1000), Seen(others_at_send=1, slots_total=1))
    assert v.kind == "queued"
    assert v.text == "queued 1.8 s behind 1 busy slot (-np 1)"
    assert v.breakdown.queue_ms == 1800 and v.breakdown.queue_source == "before prefill"


def test_a_long_wait_with_nothing_ahead_is_no_queue_claim() -> None:
    """The same 1.8 s with no other request seen: not called a queue (it may be the
    network or another client): slow-start, said so."""
    v = judge(m(2000, 3000), llama(90, 10, 200, 1000), Seen(others_at_send=0, slots_total=1))
    assert v.kind == "slow-start" and "no other request seen" in v.text


def test_the_engines_own_queue_time_needs_no_witness() -> None:
    truth = EngineTruth(
        prompt_ms=50, decode_ms=900, source="vLLM per-request metrics", raw={"queue_ms": 1500.0}
    )
    v = judge(m(1600, 2600), truth)
    assert v.kind == "queued" and v.text.startswith("queued 1.5 s")
    assert v.breakdown.queue_source == "engine"
    # the transport share: e2e − queue − prefill − decode
    assert v.breakdown.transport_ms == pytest.approx(2600 - 1500 - 50 - 900)


def test_a_short_wait_is_not_a_queue() -> None:
    v = judge(m(300, 5000), llama(90, 10, 220, 4600), Seen(others_at_send=1, slots_total=1))
    assert v.kind == "decode-bound"  # 80 ms before prefill: under QUEUE_MIN_MS


def test_prefill_bound_counts_computed_and_cached() -> None:
    v = judge(m(9000, 9400, out=8, prompt=4000), llama(3904, 96, 8900, 380))
    assert v.kind == "prefill-bound"
    assert v.text == "prefill-bound: 3,904 of 4,000 prompt tokens computed, 96 from cache"


def test_cache_hit_beats_a_short_decode() -> None:
    v = judge(m(120, 400, out=8, prompt=4000), llama(100, 3900, 60, 270))
    assert v.kind == "cache-hit"
    assert v.text == "cache hit: 3.9k of 4.0k reused, TTFT 0.12 s"


def test_preempted_from_the_engines_account() -> None:
    truth = EngineTruth(prompt_ms=50, decode_ms=900, raw={"preemptions": 2.0, "queue_ms": 1.0})
    assert judge(m(100, 1100), truth).text == "preempted 2×"
    assert judge(m(100, 1100), None, Seen(preemptions=1)).kind == "preempted"


def test_speculation_slower_than_none_and_low_acceptance() -> None:
    truth = llama(30, 0, 40, 5000, draft_n=100, draft_n_accepted=31)
    slower = judge(m(60, 5060), truth, Seen(spec_baseline_tps=48.0))
    assert slower.kind == "spec-slower"
    assert slower.text.startswith("draft acceptance 31 %: speculation slower than none")
    low = judge(m(60, 5060), truth)  # no baseline measured: it can only say the rate
    assert low.kind == "spec-low" and "31 %" in low.text
    good = judge(m(60, 5060), llama(30, 0, 40, 5000, draft_n=100, draft_n_accepted=90))
    assert good.kind == "decode-bound"  # speculation kept most: not the limit
    assert good.breakdown.acceptance == 0.9


def test_decode_shared_with_others() -> None:
    v = judge(m(100, 5000), llama(90, 10, 60, 4800), Seen(others_at_send=0, others_max=7))
    assert v.text == "decode shared with 7 other requests"


def test_nothing_to_decide_on_says_so() -> None:
    """No engine report and a TTFT that is most of the request: queue and prefill cannot
    be told apart — unknown, never a guess."""
    v = judge(m(4000, 4500), None)
    assert v.kind == "unknown" and "no prefill time" in v.text
    assert breakdown_line(v.breakdown) == "decode 500 ms"  # what was measured, only that
    # … but a decode that is most of the request is measured by the client itself
    assert judge(m(100, 4500), None).kind == "decode-bound"
    assert judge(RequestMetrics(ttft_ms=None, ttfr_ms=None, e2e_ms=100.0), None).kind == "unknown"


def test_failed_and_cancelled() -> None:
    assert judge(m(100, 200), None, state="failed").kind == "failed"
    assert judge(m(100, 200, finish_reason="cancelled"), None).kind == "cancelled"


def test_verdict_round_trip_and_hostile_dicts() -> None:
    v = judge(m(2000, 3000), llama(90, 10, 200, 1000), Seen(others_at_send=1, slots_total=1))
    assert verdict_from_dict(v.to_dict()) == v
    assert verdict_from_dict({"kind": "rm -rf", "text": "x"}) is None
    assert verdict_from_dict({"kind": "queued", "text": 5}) is None
    bad = verdict_from_dict(
        {"kind": "queued", "text": "q" * 5000, "queue_ms": float("nan"), "drafted": True}
    )
    assert bad is not None and len(bad.text) == 300
    assert bad.breakdown.queue_ms is None and bad.breakdown.drafted is None
    assert set(VERDICT_KINDS) >= {"queued", "prefill-bound", "cache-hit", "unknown"}


def test_breakdown_from_a_cached_only_report() -> None:
    """Messages' cache_read_input_tokens alone: cached and computed, no times."""
    b = breakdown(
        m(100, 600, prompt=34),
        EngineTruth(prompt_tokens=34, prompt_eval_tokens=1, cached_tokens=33),
    )
    assert (b.cached_tokens, b.computed_tokens, b.prefill_ms, b.queue_ms) == (33, 1, None, None)


def test_breakdown_line() -> None:
    b = Breakdown(
        queue_ms=1800,
        queue_source="engine",
        prefill_ms=310,
        computed_tokens=3904,
        cached_tokens=96,
        decode_ms=2100,
        transport_ms=4,
        drafted=64,
        accepted=59,
    )
    assert breakdown_line(b) == (
        "queue 1.8 s (engine) · prefill 310 ms: 3,904 computed + 96 cached · decode 2.1 s · "
        "transport 4 ms · drafts 59 of 64 accepted (92 %)"
    )
    assert isinstance(judge(m(1, 2), None), Verdict)
