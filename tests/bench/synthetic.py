"""Hand-built request records with known timings (for known-answer statistics tests)."""

from __future__ import annotations

from tui.bench.run.plan import BenchPlan
from tui.bench.run.records import LevelRun, RequestRecord
from tui.bench.run.results import BenchResult, EngineRun
from tui.core.events import ANSWER, REASONING, Finished, RequestSent, TextChunk, Usage
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline

MS = 1_000_000


def record(
    start_ms: float,
    ttft_ms: float,
    n_tokens: int,
    gap_ms: float,
    level: str = "c=1",
    concurrency: int = 1,
    index: int = 0,
) -> RequestRecord:
    """A request sent at start_ms: first token after ttft_ms, then one token per gap_ms."""
    return reasoning_record(start_ms, ttft_ms, 0, n_tokens, gap_ms, level, concurrency, index)


def reasoning_record(
    start_ms: float,
    ttft_ms: float,
    think: int,
    answer: int,
    gap_ms: float,
    level: str = "c=1",
    concurrency: int = 1,
    index: int = 0,
    counted: str = "chunks",
) -> RequestRecord:
    """A request sent at start_ms: first token after ttft_ms, then one token per gap_ms;
    the first ``think`` tokens are reasoning, the next ``answer`` the answer. So TTFO =
    ttft_ms + think · gap_ms and thinking time = think · gap_ms (when answer > 0).
    ``counted``: the engine gives per-chunk counts ("chunks"), a reasoning count in its
    usage ("usage"), or neither ("none": R is then the chunk-count estimate)."""
    t0 = int(start_ms * MS)
    tl = RequestTimeline()
    tl.add(RequestSent(t0))
    t = t0 + int(ttft_ms * MS)
    n_tokens = think + answer
    for i in range(n_tokens):
        part = REASONING if i < think else ANSWER
        tl.add(TextChunk(t, f"w{i} ", None if counted == "none" else 1, part))
        if i < n_tokens - 1:
            t += int(gap_ms * MS)
    tl.add(Usage(t, 10, n_tokens, think if counted == "usage" else None))
    tl.add(Finished(t, "length"))
    return RequestRecord(
        engine="e",
        phase="warm",
        level=level,
        index=index,
        request_id=f"r{index}",
        t_start_s=t0 / 1e9,
        t_end_s=t / 1e9,
        timeline=tl,
        metrics=compute_metrics(tl),
        status="ok",
        concurrency=concurrency,
    )


def level(records: list[RequestRecord], c: int) -> LevelRun:
    lv = LevelRun("e", f"c={c}", "concurrency", concurrency=c, records=records)
    lv.complete = True
    return lv


def result(levels: list[LevelRun], slo: dict[str, float] | None = None) -> BenchResult:
    """A finished bench of one engine "e" (kind pace) with these levels, nothing random in
    it but what its statistics draw (seeded)."""
    plan = BenchPlan(engines=["e"], runs=3, warmup=0, max_tokens=16, slo=slo or {})
    run = EngineRun(name="e", kind="pace", spec={"name": "e", "kind": "pace"}, levels=levels)
    res = BenchResult(plan, "2026-01-01T00:00:00+00:00", [run], "2026-01-01T00:01:00+00:00")
    res.partial, res.partial_reason = False, None
    return res
