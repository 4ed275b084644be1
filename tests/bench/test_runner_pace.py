"""The runner against the pace engine (known per-request speed): η, queueing, Poisson,
cold starts, stopping, failures. Until the issue-3 pace *server* lands this uses the
in-process pace engine of tests/bench/pace_engine.py.

The tests of timing arithmetic (η, decode tok/s, queueing, arrival times, load time) run
on virtual time (tests/support/virtual_time.py): the runner, its load patterns and the
pace engine read a clock that moves only when something sleeps, so the answers are exact
and the same on an idle or a busy machine. Who waits for whom is still real: a runner
that sent the c requests of a level one after another would give η = 1 there too."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest

import tui.bench.run.hooks as hooks_module
import tui.bench.run.loads as loads_module
import tui.bench.run.open_loop as open_loop_module
import tui.bench.run.runner as runner_module
from tests.bench import pace_engine
from tests.support.virtual_time import VirtualClock, run_virtual
from tui.bench.run.plan import BenchPlan
from tui.bench.run.runner import BenchRunner
from tui.bench.stats.aggregate import summarize_result
from tui.engines.base import EngineSpec

TOKEN_MS = 20.0
N_TOK = 10


def pace(name: str = "p", **options) -> EngineSpec:
    opts = {"token_ms": TOKEN_MS, "ttft_ms": 20.0, "reload_ms": 30.0}
    opts.update(options)
    return EngineSpec(name=name, kind="pace", options=opts)


def plan(**kw) -> BenchPlan:
    base = dict(engines=["p"], runs=3, warmup=0, prompt_tokens=40, max_tokens=N_TOK)
    base.update(kw)
    return BenchPlan(**base)


async def run(p: BenchPlan, specs: list[EngineSpec]):
    runner = BenchRunner(p, specs)
    return runner, await runner.run()


@pytest.fixture
def clock(monkeypatch) -> VirtualClock:
    """Virtual time for the runner, the load patterns, the cold-start hook and the pace
    engine (every clock they read, and the pace engine's sleeps)."""
    c = VirtualClock()
    for module in (runner_module, loads_module, open_loop_module, hooks_module, pace_engine):
        monkeypatch.setattr(module, "time", c.time)
    return c


def bench(clock: VirtualClock, p: BenchPlan, specs: list[EngineSpec]):  # type: ignore[no-untyped-def]
    """The result of running ``p`` on virtual time."""
    return run_virtual(lambda: BenchRunner(p, specs).run(), clock)


def test_eta_matches_known_parallelism(clock):
    # 8 slots: c=4 runs 4 requests truly in parallel, so η = 4 and per-request speed holds
    res = bench(clock, plan(concurrency=[1, 4]), [pace(slots=8)])
    e = summarize_result(res)["engines"][0]
    c1, c4 = e["levels"]
    assert c1["eta"] == pytest.approx(1.0)
    assert c4["eta"] == pytest.approx(4.0)
    # each request: 20 ms to the first token, then 9 gaps of 20 ms
    assert c1["wall_s"] == pytest.approx(3 * 0.2) and c4["wall_s"] == pytest.approx(3 * 0.2)
    for lv in (c1, c4):
        assert lv["medians"]["decode_tps"]["estimate"] == pytest.approx(1000 / TOKEN_MS)
        assert lv["medians"]["ttft_ms"]["estimate"] == pytest.approx(20.0)
        assert lv["ok"] == 3 * lv["concurrency"]
    assert not e["warnings"]


def test_eta_saturates_at_capacity_and_warns(clock):
    res = bench(clock, plan(concurrency=[1, 4]), [pace(slots=2)])
    e = summarize_result(res)["engines"][0]
    assert e["capacity"] == 2
    assert e["levels"][1]["eta"] == pytest.approx(2.0)
    assert any("exceeds p's parallel capacity (2)" in w for w in e["warnings"])
    # queued requests wait: half of c=4's requests wait one whole request (200 ms) for a
    # slot, and RequestSent is stamped before the wait, so it is in their TTFT
    ttft = e["levels"][1]["percentiles"]["ttft_ms"]
    assert ttft["p90"] == pytest.approx(220.0) and ttft["p50"] <= 220.0


def test_poisson_arrivals_follow_the_seeded_schedule(clock):
    rate = 20.0
    res = bench(clock, plan(concurrency=[1], rate=rate, seed=7), [pace()])
    lv = res.engines[0].levels[-1]
    assert lv.label == "rate=20" and lv.kind == "poisson" and len(lv.records) == 3
    rng = random.Random(7)
    due, expected = 0.0, []
    for _ in range(3):
        due += rng.expovariate(rate)
        expected.append(due)
    starts = sorted(r.t_start_s for r in lv.records)
    got = [s - starts[0] for s in starts]
    want = [x - expected[0] for x in expected]
    assert got == pytest.approx(want, abs=1e-6)  # nanosecond stamps, exact schedule


async def test_prompt_length_is_calibrated_with_the_engine_tokenizer():
    _, res = await run(plan(prompt_tokens=57), [pace()])
    shape = res.engines[0].prompt
    assert shape.method == "engine tokenizer" and shape.counted_tokens == 57
    assert all(r.metrics.prompt_tokens in (57,) for r in res.engines[0].measured())


async def test_prompt_length_by_usage_probe_without_tokenizer():
    _, res = await run(plan(prompt_tokens=57), [pace(tokenizer=False)])
    run_ = res.engines[0]
    assert run_.prompt.method == "usage probe" and run_.prompt.counted_tokens == 57
    assert 1 <= len(run_.calibration) <= 4
    assert all(r.phase == "calibrate" for r in run_.calibration)


def test_cold_starts_are_timed_and_reported_apart(clock):
    res = bench(clock, plan(cold=True), [pace(reload_ms=50.0)])
    e = summarize_result(res)["engines"][0]
    assert e["cold_method"] == "pace engine: sleep reload_ms"
    assert e["cold"]["ok"] == 3
    assert e["cold"]["load_ms"]["estimate"] == pytest.approx(50.0)
    assert all(r.phase == "cold" for r in res.engines[0].cold.records)


async def test_engine_without_cold_hook_says_so():
    from tests.bench import pace_engine

    class Plain(pace_engine.PaceEngine):
        restart = None  # type: ignore[assignment]

    runner = BenchRunner(plan(cold=True), [pace()], engine_factory=lambda s: Plain(s))
    res = await runner.run()
    e = summarize_result(res)["engines"][0]
    assert e["cold_method"] is None
    assert "cannot be forced" in e["cold_note"]
    assert e["cold"]["requests"] == 0


async def test_always_failing_engine_is_reported_not_dropped():
    _, res = await run(plan(), [pace(fail="always")])
    e = summarize_result(res)["engines"][0]
    assert e["all_failed"] and e["ok"] == 0 and e["failed"] == 3
    assert all("told to fail" in f["message"] for f in e["failures"])


async def test_unloadable_engine_is_reported():
    _, res = await run(plan(), [EngineSpec(name="x", kind="llamacpp", model="/nonexistent.gguf")])
    e = summarize_result(res)["engines"][0]
    assert e["all_failed"] and "model file not found" in e["error"]


async def test_stop_from_another_thread_cancels_and_marks_partial():
    p = plan(runs=50, concurrency=[2])
    first = threading.Event()

    def on_update(u) -> None:  # type: ignore[no-untyped-def]
        # stop from another thread once the level is running (a fixed delay could land in
        # the calibration on a slow or loaded machine, before any level exists)
        if u.record is not None and u.record.phase == "warm" and not first.is_set():
            first.set()
            threading.Timer(0.05, runner.stop, kwargs={"reason": "test stop"}).start()

    runner = BenchRunner(p, [pace()], on_update=on_update)
    res = await asyncio.wait_for(runner.run(), 20)
    assert res.partial and res.partial_reason == "test stop"
    lv = res.engines[0].levels[0]
    assert not lv.complete
    assert 0 < len(lv.records) < 100
    assert sum(r.status == "cancelled" for r in lv.records) >= 1
    e = summarize_result(res)["engines"][0]
    assert e["cancelled"] >= 1 and not e["all_failed"]


async def test_progress_updates_count_to_the_total():
    seen = []
    runner = BenchRunner(plan(warmup=1, concurrency=[1, 2]), [pace()], on_update=seen.append)
    await runner.run()
    done = [u for u in seen if u.record is not None]
    assert done[-1].done == done[-1].total == 1 + 3 + 6
    assert done[-1].eta_s == pytest.approx(0.0)


def test_engine_side_queue_before_request_sent_is_pointed_out(clock):
    # one slot, 3 in flight, RequestSent stamped only when a slot frees: the wait is not
    # in TTFT, so the report must say where it went
    res = bench(clock, plan(concurrency=[3]), [pace(slots=1, late_sent=True)])
    s = summarize_result(res)
    lv = s["engines"][0]["levels"][0]
    assert lv["pre_send_wait_ms"]["p90"] >= 200.0  # a whole request (200 ms) or more
    assert lv["percentiles"]["ttft_ms"]["p90"] == pytest.approx(20.0)  # TTFT itself
    assert any("inside the engine before it stamped them sent" in n for n in s["fairness"])
    res = bench(clock, plan(concurrency=[3]), [pace(slots=1)])
    assert not any("stamped them sent" in n for n in summarize_result(res)["fairness"])


async def test_prompt_lengths_that_cannot_match_across_engines_are_flagged():
    # engine b's chat template alone is 60 tokens: a 40-token prompt is impossible there
    p = plan(engines=["a", "b"], prompt_tokens=40)
    specs = [pace("a"), pace("b", template_tokens=60)]
    res = await BenchRunner(p, specs).run()
    s = summarize_result(res)
    a, b = s["engines"]
    assert a["prompt"]["counted_tokens"] == 40
    assert b["prompt"]["counted_tokens"] > 60
    assert any("closest prompt length found is" in w for w in b["warnings"])
    assert any("prompt token counts differ between engines" in n for n in s["fairness"])


async def test_checkpoints_inside_a_level_include_its_requests(monkeypatch):
    import tui.bench.run.runner as runner_module

    monkeypatch.setattr(runner_module, "CHECKPOINT_EVERY_S", 0.0)
    seen: list[tuple[str, int, bool]] = []

    def checkpoint(result):
        for lv in result.engines[0].levels:
            seen.append((lv.label, len(lv.records), result.partial))

    runner = BenchRunner(plan(runs=4, concurrency=[2]), [pace()])
    runner.checkpoint = checkpoint
    res = await runner.run()
    mid = [n for label, n, partial in seen if label == "c=2" and partial]
    assert 0 < min(mid) < 8  # written while the level was still running
    # none after the last level: the caller writes the final report from the result
    assert max(mid) <= 8 and len(res.engines[0].levels[0].records) == 8
