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
    # (its threads spin at barriers), and α would measure the machine, not the queue
    spec = EngineSpec("local", "llamacpp", model=str(model_path), n_threads=1)
    res = await BenchRunner(plan(), [spec]).run()
    report = build_report(res, n_boot=500)
    e = check_depth(report)
    assert e["depth"][1]["context"]["method"] == "usage probe"
    # one request at a time: two in flight wait for each other, which the client latency
    # keeps (T_total(2) ≈ 1.75·T_single with 2 runs each: α ≈ 0.07). Had the queue inside
    # the engine been lost, T_total(2) ≈ T_single and α ≈ 0.5 (perfect batching at N=2).
    b = e["batching"]
    a = b["alpha"]
    assert a["estimate"] < 0.4 and a["low"] <= a["estimate"] <= a["high"]
    assert b["levels"][1]["residual_ms"] == pytest.approx(0.0, abs=1e-3)  # one point: exact


async def test_depth_and_batching_llama_server(tmp_path, model_path):
    import real_servers as servers

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
