"""Bench outcomes held until their level ends, then published with the verdict the report
gives each request (tui/bench/run/published.py), on records made by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.support.made_outcomes import KeptOutcomes, metrics
from tui.bench.report.files import build_report
from tui.bench.run.plan import BenchPlan
from tui.bench.run.published import HeldOutcomes
from tui.bench.run.records import LevelRun, RequestRecord
from tui.bench.run.results import BenchResult, EngineRun, spec_for_report
from tui.bench.stats.why import verdicts
from tui.core.events import EngineTruth
from tui.core.outcome import Outcomes, Where
from tui.core.timeline import RequestTimeline
from tui.engines.base import EngineSpec

WHERE = Where("/v1/chat/completions", "openai-chat", "http://127.0.0.1:8080", "m", "llama-server")
MS = 1_000_000


def record(
    engine: str, rid: str, sent_ms: int, ttft_ms: float, e2e_ms: float, level: str = "c=2"
) -> RequestRecord:
    """A warm request sent at ``sent_ms`` whose prefill took 20 ms (the engine's timing):
    the rest of its TTFT was a wait before the prefill."""
    tl = RequestTimeline(t_sent_ns=10**12 + sent_ms * MS)
    tl.t_end_ns = tl.t_sent_ns + int(e2e_ms * MS)
    tl.truth = EngineTruth(prompt_tokens=32, prompt_ms=20.0, source="llama-server timings")
    m = metrics(ttft_ms=ttft_ms, ttfr_ms=ttft_ms, ttfo_ms=ttft_ms, e2e_ms=e2e_ms)
    return RequestRecord(
        engine, "warm", level, 0, rid, sent_ms / 1e3, (sent_ms + e2e_ms) / 1e3, tl, m, "ok"
    )


def spec(name: str, spec_type: str | None = None) -> EngineSpec:
    options = {} if spec_type is None else {"spec_type": spec_type}
    return EngineSpec(name, "llama-server", model="/m.gguf", options=options)


def bench(*specs: EngineSpec) -> tuple[BenchResult, HeldOutcomes, KeptOutcomes]:
    keep = KeptOutcomes()
    outcomes = Outcomes()
    outcomes.add(keep)
    result = BenchResult(plan=BenchPlan(engines=[s.name for s in specs]), started_at="now")
    return result, HeldOutcomes(outcomes, result.engines, list(specs)), keep


def engine_run(result: BenchResult, s: EngineSpec, records: list[RequestRecord]) -> EngineRun:
    run = EngineRun(s.name, s.kind, spec_for_report(s), info={"parameters": {"total_slots": 1}})
    level = LevelRun(s.name, "c=2", "concurrency", concurrency=2)
    level.records = records
    run.levels.append(level)
    result.engines.append(run)
    return run


def test_a_level_is_published_when_it_ends_with_the_reports_verdicts() -> None:
    s = spec("ls")
    result, held, keep = bench(s)
    # a runs alone for 1 s; b, sent 10 ms later, waits for the one slot, then decodes
    a = record("ls", "a", 0, 50.0, 1000.0)
    b = record("ls", "b", 10, 1040.0, 1900.0)
    engine_run(result, s, [a, b])
    held.hold(a, WHERE)
    held.hold(b, WHERE)
    assert keep.seen == []  # nothing on the request's path
    held.level_ended("ls")
    assert [o.id for o in keep.seen] == ["a", "b"]  # in the order they ended
    got = {o.id: o.verdict for o in keep.seen}
    assert got["b"] is not None and got["b"].kind == "queued"
    assert "behind 1 busy slot (-np 1)" in got["b"].text
    assert got["a"] is not None and got["a"].kind != "queued"
    # the report reads the same verdicts; computed afresh they are the same
    report = build_report(result, n_boot=20)
    in_report = {r["request_id"]: r["verdict"] for r in report["engines"][0]["records"]}
    assert in_report == {o.id: o.verdict.to_dict() for o in keep.seen if o.verdict}
    fresh = [dataclasses.replace(r, verdict=None) for r in (a, b)]
    again = verdicts(fresh, result.engines[0].info)
    assert [again[id(r)] for r in fresh] == [got["a"], got["b"]]
    held.close()
    assert len(keep.seen) == 2  # published once


def test_a_stored_verdict_is_the_one_the_report_reads() -> None:
    s = spec("ls")
    result, held, keep = bench(s)
    a = record("ls", "a", 0, 50.0, 1000.0)
    engine_run(result, s, [a])
    held.hold(a, WHERE)
    held.level_ended("ls")
    assert a.verdict is not None and keep.seen[0].verdict is a.verdict
    assert verdicts([a], {})[id(a)] is a.verdict  # not computed twice


def test_a_speculating_engine_waits_for_its_later_twin() -> None:
    fast, plain = spec("ls ngram", "ngram-simple"), spec("ls none", "none")
    result, held, keep = bench(fast, plain)
    # speculation decoded at 80 tok/s; the twin, run after it, at 120 tok/s
    s1 = record("ls ngram", "s1", 0, 50.0, 1000.0, level="c=1")
    assert s1.timeline.truth is not None
    drafts = {"draft_n": 40, "draft_n_accepted": 12}
    s1.timeline.truth = dataclasses.replace(s1.timeline.truth, raw=drafts)
    engine_run(result, fast, [s1])
    held.hold(s1, WHERE)
    held.level_ended("ls ngram")
    held.engine_ended("ls ngram")
    assert keep.seen == []  # its "spec-slower" needs the twin's speed
    n1 = record("ls none", "n1", 2000, 50.0, 800.0, level="c=1")
    n1.metrics = dataclasses.replace(n1.metrics, decode_tps=120.0)
    engine_run(result, plain, [n1])
    held.hold(n1, WHERE)
    held.level_ended("ls none")
    assert [o.id for o in keep.seen] == ["n1"]
    held.engine_ended("ls none")
    assert [o.id for o in keep.seen] == ["n1", "s1"]
    # the twin's median is the baseline the report uses too: the verdicts agree
    report = build_report(result, n_boot=20)
    in_report = {
        r["request_id"]: r["verdict"]["text"] for e in report["engines"] for r in e["records"]
    }
    assert {o.id: o.verdict.text for o in keep.seen if o.verdict} == in_report
    assert s1.verdict is not None and s1.verdict.kind == "spec-slower", s1.verdict


def test_an_earlier_twin_does_not_hold_anything_back() -> None:
    plain, fast = spec("ls none"), spec("ls ngram", "ngram-simple")
    result, held, keep = bench(plain, fast)
    engine_run(result, plain, [])
    held.engine_ended("ls none")
    s1 = record("ls ngram", "s1", 0, 50.0, 1000.0)
    engine_run(result, fast, [s1])
    held.hold(s1, WHERE)
    held.level_ended("ls ngram")
    assert [o.id for o in keep.seen] == ["s1"]


def test_a_stopped_bench_still_publishes_what_it_held() -> None:
    fast, plain = spec("ls ngram", "ngram-simple"), spec("ls none")
    result, held, keep = bench(fast, plain)
    s1 = record("ls ngram", "s1", 0, 50.0, 1000.0)
    engine_run(result, fast, [s1])
    held.hold(s1, WHERE)
    held.engine_ended("ls ngram")  # the twin never ran: the bench was stopped
    assert keep.seen == []
    held.close()
    assert [o.id for o in keep.seen] == ["s1"] and keep.seen[0].verdict is s1.verdict


def test_a_cut_request_is_cancelled_in_its_outcome_and_its_verdict() -> None:
    s = spec("ls")
    result, held, keep = bench(s)
    a = record("ls", "a", 0, 50.0, 1000.0, level="rate=4")
    engine_run(result, s, [a])
    held.hold(a, WHERE)
    a.status = "cut"  # the open-loop level cuts what its limit left in flight, after it ended
    held.level_ended("ls")
    (o,) = keep.seen
    assert o.state == "cancelled" and o.verdict is not None and o.verdict.kind == "cancelled"


def test_a_level_larger_than_a_sinks_queue_is_kept_whole(tmp_path: Path) -> None:
    """300 requests end in one level; the real ledger and OTLP exporter hold 50 each:
    every one is written and exported as they drain, none dropped (published one by one
    they would drop 250)."""
    from tests.support.otlp_sink import OtlpSink
    from tui.ledger.writer import LedgerSink
    from tui.otel.export import OtelExporter

    s = spec("big")
    result, held, keep = bench(s)
    ledger = LedgerSink(tmp_path / "ledger.sqlite", queue_limit=50)
    collector = OtlpSink()
    otel = OtelExporter(collector.url, metrics=False, queue_limit=50, batch=20, flush_s=0.05)
    held.outcomes.add(ledger)
    held.outcomes.add(otel)
    records = [record("big", f"r{i}", 2 * i, 30.0, 40.0) for i in range(300)]
    engine_run(result, s, records)
    try:
        for r in records:
            held.hold(r, WHERE)
        held.level_ended("big")
        assert otel.flush(timeout_s=10)
    finally:
        held.outcomes.close()
        collector.stop()
    assert len(keep.seen) == 300
    assert (ledger.written, ledger.dropped) == (300, 0)
    assert (otel.stats.spans_exported, otel.stats.spans_dropped) == (300, 0)
    assert len(collector.spans) == 300
