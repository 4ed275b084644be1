"""Hand-built request records with known timings (for known-answer statistics tests)."""

from __future__ import annotations

from tui.bench.run.records import LevelRun, RequestRecord
from tui.core.events import Finished, RequestSent, TextChunk, Usage
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
    t0 = int(start_ms * MS)
    tl = RequestTimeline()
    tl.add(RequestSent(t0))
    t = t0 + int(ttft_ms * MS)
    for i in range(n_tokens):
        tl.add(TextChunk(t, f"w{i} ", 1))
        if i < n_tokens - 1:
            t += int(gap_ms * MS)
    tl.add(Usage(t, 10, n_tokens))
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
