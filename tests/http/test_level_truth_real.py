"""The bench against real llama-server and vLLM: the engine's account per level, taken
before and after each level, never inside it; per-request truth only at c = 1."""

from __future__ import annotations

import pytest

from tui.bench.run.plan import BenchPlan
from tui.bench.run.runner import BenchRunner
from tui.engines.base import EngineSpec

pytestmark = pytest.mark.engine
TOKENS = 8


def plan(name: str) -> BenchPlan:
    return BenchPlan(
        engines=[name], runs=2, warmup=1, prompt_tokens=32, max_tokens=TOKENS,
        concurrency=[1, 2], temperature=0.0,
    )  # fmt: skip


async def test_llama_server_levels_carry_its_counters_and_cost_two_scrapes(llama_server):
    spec = EngineSpec(name="ls", kind="llama-server", url=llama_server.url)
    res = await BenchRunner(plan("ls"), [spec]).run()
    run = res.engines[0]
    assert run.error is None and [lv.label for lv in run.levels] == ["c=1", "c=2"]
    for level in run.levels:
        ok = [r for r in level.records if r.ok]
        assert len(ok) == level.concurrency * 2  # type: ignore[operator]
        truth = level.engine_truth
        assert truth is not None and truth["source"].startswith("llama-server /metrics")
        # the engine counted exactly the level's tokens: nothing else ran in its window
        assert truth["generation_tokens"] == sum(r.metrics.output_tokens for r in ok)
        assert truth["decode_tps_per_slot"] > 0 and truth["prefill_tps_per_slot"] > 0
        # one scrape before the level, one after: the only requests it did not measure
        assert level.extra_requests == {"GET /metrics": 2}
        assert level.paused_s == 0.0  # llama-server's per-request truth is in its stream
        assert all(r.timeline.truth is not None for r in ok)
    setup = run.setup_requests
    assert setup["generation (warm-up)"] == 1 and setup["GET /props"] >= 1
    assert res.own_cpu is not None and res.own_cpu["cpu_s"] > 0


async def test_vllm_c1_keeps_per_request_truth_and_c2_is_only_bracketed(vllm_server):
    spec = EngineSpec(name="vllm", kind="vllm", url=vllm_server.url)
    res = await BenchRunner(plan("vllm"), [spec]).run()
    run = res.engines[0]
    assert run.error is None
    c1, c2 = run.levels
    # c = 1: each request has vLLM's own numbers (one request per scrape window, the
    # scrape after one request the next one's before), and the time between requests —
    # the bench's scrapes — is left out of the level's wall time
    assert all(r.timeline.truth is not None for r in c1.records)
    assert c1.extra_requests["GET /metrics"] >= 2 + len(c1.records)
    span = max(r.t_end_s for r in c1.records) - min(r.t_start_s for r in c1.records)
    assert c1.paused_s > 0 and c1.wall_s == pytest.approx(span - c1.paused_s)
    # c = 2: no scrape per request (none could be attributed), one before and one after
    # the level (and a retry or two while vLLM counts the last request)
    assert all(r.timeline.truth is None for r in c2.records)
    assert 2 <= c2.extra_requests["GET /metrics"] <= 2 + 40
    assert c2.paused_s == 0.0
    for level in (c1, c2):
        ok = [r for r in level.records if r.ok]
        truth = level.engine_truth
        assert truth is not None and truth["requests"] == len(ok)
        assert truth["generation_tokens"] == sum(r.metrics.output_tokens for r in ok)
        ttft = truth["histograms"]["ttft_ms"]
        assert ttft["count"] == len(ok) and ttft["p50"] > 0
        # the engine's TTFT is inside ours (ours adds the network and HTTP around it)
        ours = sorted(r.metrics.ttft_ms for r in ok)
        assert ttft["mean"] <= max(ours) + 1.0
