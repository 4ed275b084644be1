"""A bench against the real llama-server with one slot (``-np 1``, SmolLM2) at c=2: the
outcomes it publishes (what the ledger and OpenTelemetry get) and the ledger's rows carry
each request's verdict — "queued … behind 1 busy slot (-np 1)" for the requests that
waited — equal to the report's verdict for the same request id, published once the level
has ended."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.bench.report.files import build_report
from tui.bench.run.plan import BenchPlan
from tui.bench.run.runner import BenchRunner
from tui.bench.stats.why import verdicts
from tui.core.outcome import Outcomes, RequestOutcome
from tui.engines.base import EngineSpec
from tui.ledger.writer import LedgerSink

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def one_slot_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.support import real_servers as servers
    from tui.engines.files.default_model import default_model_path

    model = default_model_path()
    assert model is not None
    with servers.running_llama_server(model, tmp_path_factory.mktemp("ls1")) as sp:  # -np 1
        yield sp.url


class Stamped:
    """Keeps each outcome with the moment it was published."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, RequestOutcome]] = []

    def publish(self, outcome: RequestOutcome) -> None:
        self.seen.append((time.perf_counter_ns(), outcome))

    def close(self) -> None:
        pass


async def test_queued_requests_are_published_with_the_reports_verdicts(
    one_slot_url: str, tmp_path: Path
) -> None:
    plan = BenchPlan(
        engines=["ls"], runs=2, warmup=1, prompt_tokens=32, max_tokens=24, concurrency=[2]
    )
    plan.validate()
    sink = Stamped()
    outcomes = Outcomes()
    outcomes.add(sink)
    ledger = LedgerSink(tmp_path / "ledger.sqlite3")
    outcomes.add(ledger)
    spec = EngineSpec("ls", "llama-server", url=one_slot_url)
    try:
        res = await BenchRunner(plan, [spec], outcomes=outcomes).run()
    finally:
        ledger.close()
    run = res.engines[0]
    assert run.error is None and not res.partial
    (level,) = run.levels
    assert len(level.records) == 4 and all(r.ok for r in level.records)
    # every request sent was published once, with a verdict
    published = {o.id: (t, o) for t, o in sink.seen}
    assert len(published) == len(sink.seen)
    assert {r.request_id for r in run.records()} <= set(published)
    assert all(o.verdict is not None for _t, o in sink.seen)
    # ... equal to the report's for the same request id
    report = build_report(res, n_boot=50)
    for rec in report["engines"][0]["records"]:
        got = published[rec["request_id"]][1].verdict
        assert got is not None and got.to_dict() == rec["verdict"], rec["request_id"]
    # ... and the ledger's row of each keeps its kind
    con = sqlite3.connect(str(tmp_path / "ledger.sqlite3"))
    rows = dict(con.execute("SELECT rid, verdict FROM requests WHERE source = 'bench'"))
    con.close()
    assert rows == {o.id: o.verdict.kind for _t, o in sink.seen if o.verdict}
    # ... and to the one computed afresh over the whole engine's records, as before
    fresh = [dataclasses.replace(r, verdict=None) for r in run.records()]
    again = verdicts(fresh, run.info)
    for r in fresh:
        assert again[id(r)] == published[r.request_id][1].verdict
    # one slot, two users: each request sent while the other was in the slot waited for
    # it, and says so (the first pair's order at the server is its own: at least the two
    # sent later into a busy slot)
    said = [published[r.request_id][1].verdict for r in level.records]
    queued = [v for v in said if v is not None and v.kind == "queued"]
    assert len(queued) >= 2, said
    assert [rows[r.request_id] for r in level.records].count("queued") == len(queued)
    for v in queued:
        assert "behind 1 busy slot (-np 1)" in v.text
        assert v.breakdown.queue_ms is not None and v.breakdown.queue_ms >= 100
    # the level's outcomes went out after its last request ended, not one by one
    last_end = max(r.timeline.t_end_ns or 0 for r in level.records)
    assert all(published[r.request_id][0] > last_end for r in level.records)
