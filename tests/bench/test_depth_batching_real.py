"""--depth and the batching fit against real engines: the in-process llama.cpp model and
llama.cpp's llama-server (small sizes: a 64-token question, 8 output tokens, 2 runs)."""

from __future__ import annotations

import pytest

from tui.bench.report.files import build_report
from tui.bench.run.plan import BenchPlan
from tui.bench.run.runner import BenchRunner
from tui.engines.base import EngineSpec

pytestmark = pytest.mark.engine

DEPTH = 128


def plan(**kw) -> BenchPlan:  # type: ignore[no-untyped-def]
    base = dict(
        engines=["e"],
        runs=2,
        warmup=0,
        prompt_tokens=64,
        max_tokens=8,
        concurrency=[1, 2],
        depths=[0, DEPTH],
    )
    base.update(kw)
    return BenchPlan(**base)  # type: ignore[arg-type]


def check_depth(report: dict) -> dict:  # type: ignore[type-arg]
    """What every engine that counts prompt tokens must show for depths 0 and 128."""
    e = report["summary"]["engines"][0]
    assert e["error"] is None and e["failed"] == 0
    d0, d1 = e["depth"]
    assert (d0["depth"], d1["depth"]) == (0, DEPTH)
    assert d0["ok"] == d1["ok"] == 2
    # depth is what the engine counted: whole request minus the question alone
    assert abs(d1["counted_depth"] - DEPTH) <= 3
    assert d1["prompt_tokens_median"] == pytest.approx(
        d0["prompt_tokens_median"] + d1["counted_depth"], abs=1
    )
    records = {r["level"]: r for r in report["engines"][0]["records"] if r["phase"] == "warm"}
    assert records[f"depth={DEPTH}"]["metrics"]["prompt_tokens"] > 64 + DEPTH - 4
    # depth 0 is the c=1 level (the same question alone, one at a time): not asked twice
    assert d0["level"] == "c=1" and d1["level"] == f"depth={DEPTH}"
    levels = {r["level"] for r in report["engines"][0]["records"] if r["phase"] == "warm"}
    assert levels == {"c=1", "c=2", f"depth={DEPTH}"}
    # the whole context is prefilled on every request (no prompt cache): the engine's own
    # count of the tokens it evaluated (timing comparisons are left to benchmarks: this
    # machine is shared)
    for r in (r for r in report["engines"][0]["records"] if r["level"] == f"depth={DEPTH}"):
        truth = r["engine_truth"]
        assert truth["prompt_eval_tokens"] >= r["metrics"]["prompt_tokens"] - 1
        assert not truth["cached_tokens"]
    assert d1["vs_depth0"]["ttft_ms"]["low"] <= d1["vs_depth0"]["ttft_ms"]["high"]
    assert d1["medians"]["decode_tps"]["estimate"] > 0
    return e


async def test_depth_and_batching_in_process(model_path):
    # one thread: with every core asked for, llama.cpp collapses when anything else runs
    # (its threads spin at barriers)
    spec = EngineSpec("local", "llamacpp", model=str(model_path), n_threads=1)
    res = await BenchRunner(plan(), [spec]).run()
    report = build_report(res, n_boot=500)
    e = check_depth(report)
    assert e["depth"][1]["context"]["method"] == "usage probe"
    # One request at a time, its queue inside TTFT, and the fit's T_total from the client
    # latencies: checked as orders of events and sums, which hold however busy the machine.
    # (α itself is a ratio of speeds measured at different moments, T_single at c=1, and
    # load moves it: it reached 1.37 with both cores busy, against ~0.07 quiet.)
    recs = [r for r in res.engines[0].records() if r.phase == "warm" and r.level == "c=2"]
    assert len(recs) == 4  # 2 streams, 2 runs each
    served = sorted(recs, key=lambda r: r.timeline.t_first_byte_ns)
    for before, after in zip(served, served[1:]):
        # the engine's own stamps: the next one's first token after the one before ended
        assert after.timeline.t_first_byte_ns >= before.timeline.t_end_ns
        # and its clock started while that one was still being served: sent = submitted,
        # so its wait in the engine's queue is inside its TTFT, as a server's queue is
        # (stamped when it was served instead, the wait would move out to pre_send_wait)
        assert after.timeline.t_sent_ns < before.timeline.t_end_ns
    b = e["batching"]
    latencies = [r.pre_send_wait_ms + r.metrics.e2e_ms for r in recs]
    assert b["levels"][1]["t_total_ms"] == pytest.approx(sum(latencies) / len(latencies))
    a = b["alpha"]
    assert a["low"] <= a["estimate"] <= a["high"]
    assert b["levels"][1]["residual_ms"] == pytest.approx(0.0, abs=1e-3)  # one point: exact


async def test_depth_and_batching_llama_server(tmp_path, model_path):
    from tests.support import real_servers as servers

    try:  # two slots, so two requests really decode together
        sp = servers.start_llama_server(model_path, tmp_path, ["-np", "2"])
    except servers.ServerStartError as e:
        servers.unavailable("llama-server", str(e))
    try:
        spec = EngineSpec("ls", "llama-server", url=sp.url)
        res = await BenchRunner(plan(), [spec]).run()
        too_deep = await BenchRunner(plan(depths=[0, 4000]), [spec]).run()
    finally:
        sp.stop()
    report = build_report(res, n_boot=500)
    e = check_depth(report)
    assert e["capacity"] == 2
    b = e["batching"]
    a = b["alpha"]
    assert a["low"] <= a["estimate"] <= a["high"]
    assert [row["concurrency"] for row in b["levels"]] == [1, 2]
    assert b["levels"][1]["eta"] == e["levels"][1]["eta"]
    md = "\n".join(report["summary"]["fairness"])
    assert "ls: output length fixed" in md
    # a depth beyond the server's per-slot context is refused before any request
    refused = too_deep.engines[0]
    assert refused.error is not None and "n_ctx 1024" in refused.error  # 2048 / 2 slots
    assert "--depth 4000" in refused.error and not refused.records()
