"""Open-loop levels and the capacity search against the real llama-server (two slots,
SmolLM2): arrivals happen as scheduled, duration limits cut, a saturated probe stops
early with a verdict that holds, and --find-capacity reports a bracketed capacity.

Relations checked hold at any machine speed (counts, orderings, what the records show
recomputed here); no wall-clock window is asserted."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from tui.bench.report.files import build_report
from tui.bench.report.markdown import markdown
from tui.bench.run.arrivals import ArrivalSpec, arrival_stats, schedule
from tui.bench.run.capacity import saturation_watch
from tui.bench.run.loads import RequestDriver
from tui.bench.run.open_loop import run_arrivals
from tui.bench.run.plan import BenchPlan
from tui.bench.run.records import LevelRun, RequestRecord
from tui.bench.run.runner import BenchRunner
from tui.bench.stats.slo import meets_slo
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.registry import create_engine

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.support import real_servers as servers
    from tui.engines.files.default_model import default_model_path

    model = default_model_path()
    assert model is not None
    with servers.running_llama_server(
        model, tmp_path_factory.mktemp("ls"), ["-np", "2", "-c", "4096"]
    ) as sp:
        yield sp.url


def plan(**kw: object) -> BenchPlan:
    base: dict[str, object] = dict(
        engines=["ls"], runs=2, warmup=0, prompt_tokens=32, max_tokens=8, concurrency=[1]
    )
    base.update(kw)
    p = BenchPlan(**base)  # type: ignore[arg-type]
    p.validate()
    return p


async def test_a_gamma_level_with_a_ramp_sends_what_its_schedule_says(server_url: str) -> None:
    p = plan(rate=3.0, arrival="gamma", burstiness=0.5, ramp_s=2.0, duration_s=6.0, seed=11)
    res = await BenchRunner(p, [EngineSpec("ls", "llama-server", url=server_url)]).run()
    report = build_report(res, n_boot=200)
    e = report["summary"]["engines"][0]
    lv = next(lv for lv in e["levels"] if lv["rate"] == 3.0)
    assert lv["label"] == "rate=3 gamma(k=0.5)" and lv["kind"] == "gamma"
    a = lv["arrivals"]
    # the schedule is the one the asked process gives (recomputed here from the plan)
    expect = schedule(ArrivalSpec("gamma", 3.0, 0.5, 2.0, 6.0, None, 11))
    assert a["asked"]["seed"] == 11 and a["asked"]["burstiness"] == 0.5
    assert a["planned"] == len(expect) == a["sent_requests"] == lv["requests"]
    assert a["scheduled"] == arrival_stats(expect, 2.0)
    # every request was sent, none before its time (lag ≥ 0), each with its own record
    level = next(x for x in res.engines[0].levels if x.label == lv["label"])
    assert level.arrivals is not None
    by_index = {r.index: r for r in level.records}
    start = level.arrivals["start_s"]
    for k, i in enumerate(level.arrivals["sent_index"]):
        assert by_index[i].t_start_s - start >= expect[k] - 1e-6
    assert a["lag_ms"]["p50"] >= 0
    assert lv["failed"] == 0 and lv["ok"] + lv["cut"] == lv["requests"]
    md = markdown(report)
    assert "## Arrivals: asked, scheduled, sent" in md and "gamma 3/s k=0.5, ramp 2 s" in md


async def test_requests_past_the_duration_and_drain_are_cut_and_not_good(server_url: str) -> None:
    # 400 tokens take seconds even on a quiet machine (~96 tok/s): with 1 s to send and
    # 1 s more to end, requests are still in flight when the level ends
    engine = create_engine(EngineSpec("ls", "llama-server", url=server_url))
    await engine.load()
    import threading
    import time

    driver = RequestDriver(engine, "ls", time.perf_counter_ns(), threading.Event())
    level = LevelRun("ls", "rate=4 constant", "constant", rate=4.0)

    def make(i: int) -> GenerationRequest:
        return GenerationRequest.from_prompt(
            f"Request {i}: tell a long story.", max_tokens=400, ignore_eos=True, cache_prompt=False
        )

    try:
        spec = ArrivalSpec("constant", 4.0, duration_s=1.0)
        await run_arrivals(driver, spec, make, level, drain_s=1.0)
    finally:
        await engine.close()
    statuses = [r.status for r in level.records]
    assert len(statuses) == 4  # constant 4/s for 1 s: offsets 0.25, 0.5, 0.75, 1.0
    assert statuses.count("cut") >= 1 and set(statuses) <= {"ok", "cut"}
    for r in level.records:
        if r.status == "cut":  # cut before all 400 tokens came
            assert (r.metrics.output_tokens or 0) < 400
            assert not meets_slo(r, {"e2e_ms": 1e9})


async def test_a_saturated_probe_stops_early_and_its_verdict_holds(server_url: str) -> None:
    engine = create_engine(EngineSpec("ls", "llama-server", url=server_url))
    await engine.load()
    import threading
    import time

    driver = RequestDriver(engine, "ls", time.perf_counter_ns(), threading.Event())
    level = LevelRun("ls", "probe", "probe", rate=40.0)
    slo, target = {"ttft_ms": 500.0}, 0.9

    def make(i: int) -> GenerationRequest:
        return GenerationRequest.from_prompt(
            f"Request {i}: a story.", max_tokens=32, ignore_eos=True, cache_prompt=False
        )

    spec = ArrivalSpec("poisson", 40.0, duration_s=10.0, seed=5)
    try:
        await run_arrivals(
            driver, spec, make, level, drain_s=10.0, watch=saturation_watch(slo, target)
        )
    finally:
        await engine.close()
    planned = len(schedule(spec))
    assert level.stop_reason is not None and level.stop_reason.startswith("saturated")
    assert level.arrivals is not None
    sent = len(level.arrivals["sent_index"])
    assert sent < planned  # stopped before the schedule ran out
    judged: list[RequestRecord] = [r for r in level.records if r.status != "cancelled"]
    assert len(judged) == sent
    bad = sum(1 for r in judged if not meets_slo(r, slo))
    # the verdict: more misses than a 90 % target allows out of every planned request
    assert bad > math.floor((1 - target) * planned)
    flight = [n for _t, n in level.arrivals["in_flight"]]
    assert max(flight) > 2  # more in flight than the two slots: a queue


async def test_find_capacity_brackets_a_capacity(server_url: str) -> None:
    p = plan(
        runs=3,
        find_capacity=True,
        slo={"e2e_ms": 8000.0},
        attainment=0.9,
        probe_s=4.0,
        capacity_budget_s=240.0,
    )
    res = await BenchRunner(p, [EngineSpec("ls", "llama-server", url=server_url)]).run()
    report = build_report(res, n_boot=200)
    e = report["summary"]["engines"][0]
    cap = e["capacity_search"]
    probes = cap["probes"]
    # a probe starts only when twice its expected sending time fits what is left (a
    # count-limited probe may send a little longer than expected)
    assert probes and cap["search_s"] <= 1.25 * 240.0
    lo, hi = cap["interval"]
    assert lo is not None or hi is not None
    # each probe's verdict is what its records say, recomputed here
    levels = {lv.label: lv for lv in res.engines[0].levels}
    for pr in probes:
        lv = levels[pr["label"]]
        judged = [r for r in lv.records if r.status != "cancelled"]
        good = sum(1 for r in judged if meets_slo(r, p.slo))
        assert (pr["good"], pr["judged"]) == (good, len(judged))
        assert pr["passed"] == (good / len(judged) >= 0.9 and pr["stop_reason"] is None)
        if pr["passed"]:
            assert len(judged) >= 20  # a verdict never rests on a handful
    # the bracket: the capacity is the highest pass; every fail above it is at or above hi
    passes = [pr["rate"] for pr in probes if pr["passed"]]
    assert lo == (max(passes) if passes else None)
    if hi is not None:
        assert all(
            pr["rate"] >= hi
            for pr in probes
            if not pr["passed"] and (lo is None or pr["rate"] > lo)
        )
    md = markdown(report)
    assert "## Capacity: ls" in md and "## SLO attainment and goodput" in md


def most_in_flight(records: list[RequestRecord]) -> int:
    """The most requests whose [sent, ended] spans overlap at one moment."""
    events = sorted([(r.t_start_s, 1) for r in records] + [(r.t_end_s, -1) for r in records])
    most = now = 0
    for _t, step in events:  # an end at the same moment as a start comes first (-1 < 1)
        now += step
        most = max(most, now)
    return most


async def test_find_capacity_by_concurrency_brackets_whole_users(server_url: str) -> None:
    p = plan(
        concurrency=[],
        rate=None,
        find_capacity=True,
        capacity_by="concurrency",
        slo={"ttft_ms": 3000.0},
        probe_s=4.0,
        capacity_budget_s=200.0,
    )
    res = await BenchRunner(p, [EngineSpec("ls", "llama-server", url=server_url)]).run()
    report = build_report(res, n_boot=200)
    cap = report["summary"]["engines"][0]["capacity_search"]
    assert cap["unit"] == "users" and cap["by"] == "concurrency" and cap["probes"]
    levels = {lv.label: lv for lv in res.engines[0].levels}
    for pr in cap["probes"]:
        c = pr["rate"]
        assert c == int(c) >= 1
        lv = levels[pr["label"]]
        judged = [r for r in lv.records if r.status != "cancelled"]
        good = sum(1 for r in judged if meets_slo(r, p.slo))
        assert (pr["good"], pr["judged"]) == (good, len(judged))
        # c users, each sending after its last request ended: never more than c at once
        assert all(r.concurrency == c for r in judged)
        assert most_in_flight(judged) <= c
    lo, hi = cap["interval"]
    passes = [pr["rate"] for pr in cap["probes"] if pr["passed"]]
    assert lo == (max(passes) if passes else None)
    if cap["done_because"].startswith("converged"):
        assert lo is not None and hi == lo + 1
    assert "Highest number of users with SLO attainment" in markdown(report)
