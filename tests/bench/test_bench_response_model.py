"""A bench's outcomes and report.json say the model the server's answer named (from
bytes a real vLLM sent), never the model asked for; a record read back from a report
keeps it, bounded, and a session line whose ``response_model`` is not text is refused."""

from __future__ import annotations

import pytest

from tests.support.made_outcomes import KeptOutcomes
from tests.support.recorded_upstream import models_named, recorded, serving
from tui.bench.run.plan import BenchPlan
from tui.bench.run.records import RequestRecord
from tui.bench.run.runner import BenchRunner
from tui.core.events import MODEL_CHARS
from tui.core.outcome import Outcomes
from tui.core.session_check import record_problem
from tui.core.timeline import RequestTimeline
from tui.engines.base import EngineSpec


@pytest.mark.parametrize("workers", [None, 2], ids=["in-process", "worker-processes"])
async def test_bench_outcomes_and_records_name_the_model_the_server_answered(workers):
    """In the bench's process, and from its client worker processes (``--workers``: the
    records cross a pipe)."""
    body = recorded("vllm_chat_reasoning_example.sse")
    (named,) = models_named(body)
    up = serving(body)
    keep, outcomes = KeptOutcomes(), Outcomes()
    outcomes.add(keep)
    c = 1 if workers is None else 2
    plan = BenchPlan(
        engines=["up"], runs=2, warmup=1, concurrency=[c], prompt_tokens=20, max_tokens=8,
        workers=workers,
    )  # fmt: skip
    spec = EngineSpec("up", "openai", url=up.url, model="asked-for")
    try:
        res = await BenchRunner(plan, [spec], outcomes=outcomes).run()
    finally:
        up.stop()
    records = [r for lv in res.engines[0].levels for r in lv.records]
    assert len(records) == 2 * c and all(r.status == "ok" for r in records)
    if workers:
        assert {r.worker for r in records} == {1, 2}
    benched = [o for o in keep.seen if o.source == "bench"]
    assert len(benched) >= 2 * c + 1  # warm-up and the measured
    assert {(o.model, o.response_model) for o in benched} == {("asked-for", named)}
    for r in records:
        d = r.to_dict()
        assert d["timeline"]["response_model"] == named
        assert RequestRecord.from_dict(d).timeline.response_model == named


def test_a_timeline_read_back_keeps_the_model_bounded():
    tl = RequestTimeline.from_dict({"chunks": [], "response_model": "m" * 10_000})
    assert tl.response_model == "m" * MODEL_CHARS
    assert RequestTimeline.from_dict({"chunks": [], "response_model": 7}).response_model is None
    line = {"timeline": {"chunks": [], "response_model": {"a": 1}}}
    assert record_problem(line) == "timeline.response_model is not a string"
    assert record_problem({"timeline": {"chunks": [], "response_model": "m"}}) is None
