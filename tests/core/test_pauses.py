"""settle_heap: a full collection now, survivors frozen, earlier frozen garbage freed."""

from __future__ import annotations

import gc
import weakref

import pytest

from tui.core.pauses import defer_full_collections, resume_full_collections, settle_heap


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic GC frees it


def test_settle_heap_collects_cycles_and_freezes_survivors():
    try:
        kept = Node()
        dropped = Node()
        gone = weakref.ref(dropped)
        del dropped
        settle_heap()
        assert gone() is None  # the cycle was collected
        assert gc.get_freeze_count() > 0  # survivors (kept among them) are frozen
        # frozen last time, garbage now: the next settle still frees it (unfreeze first)
        was = weakref.ref(kept)
        del kept
        settle_heap()
        assert was() is None
    finally:
        gc.unfreeze()


def test_no_automatic_full_collection_while_deferred():
    generations: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            generations.append(info["generation"])

    before = gc.get_threshold()
    gc.callbacks.append(seen)
    try:
        defer_full_collections()
        defer_full_collections()  # idempotent: the original thresholds are kept
        junk = [Node() for _ in range(200_000)]  # many young collections, cycles promoted
        del junk
        assert 1 in generations and 2 not in generations
        resume_full_collections()
        assert gc.get_threshold() == before
        generations.clear()
        junk = [Node() for _ in range(200_000)]
        del junk
        gc.collect(1)
        assert gc.get_threshold() == before
    finally:
        gc.callbacks.remove(seen)
        resume_full_collections()
        gc.set_threshold(*before)


async def test_the_bench_defers_full_collections_while_requests_stream():
    """The headless bench keeps the TUI's discipline: every measured request streams with
    CPython's automatic full collections deferred, and none starts meanwhile (they run
    between levels, in settle_heap)."""
    from tui.bench.run.plan import BenchPlan
    from tui.bench.run.runner import BenchRunner
    from tui.core import pauses
    from tui.engines.base import EngineSpec

    deferred_at_end: list[bool] = []
    full_while_deferred: list[dict] = []

    def on_update(update) -> None:  # type: ignore[no-untyped-def]
        rec = update.record
        if rec is not None and rec.phase == "warm":
            deferred_at_end.append(pauses._deferred is not None)

    def seen(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2 and pauses._deferred is not None:
            full_while_deferred.append(info)

    before = gc.get_threshold()
    gc.set_threshold(50, 2, 2)  # undeferred, a full collection every ~200 allocations
    gc.callbacks.append(seen)
    try:
        plan = BenchPlan(
            engines=["s"], runs=4, warmup=0, prompt_tokens=8, max_tokens=60, concurrency=[1, 2]
        )
        spec = EngineSpec("s", "synthetic", options={"tokens_per_s": 2000, "ttft_ms": 1})
        res = await BenchRunner(plan, [spec], on_update=on_update).run()
    finally:
        gc.callbacks.remove(seen)
        gc.set_threshold(*before)
        gc.unfreeze()
    assert sum(r.ok for r in res.engines[0].measured()) == 12
    assert deferred_at_end == [True] * 12
    assert full_while_deferred == []
    assert pauses._deferred is None  # restored after the bench


def _tiny_bench(tmp_path) -> int:  # type: ignore[no-untyped-def]
    """``infertop bench`` (in this process) on the synthetic engine: one request."""
    import argparse

    from tui.cli import bench as bench_cli

    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'default_engine = "s"\n[engines.s]\nkind = "synthetic"\n'
        "options = { tokens_per_s = 2000, ttft_ms = 1 }\n"
    )
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    args = parser.parse_args(
        ["--runs", "1", "--warmup", "0", "--max-tokens", "4"]
        + ["--prompt-tokens", "8", "--out", str(tmp_path / "o")]
    )
    args.config = str(cfg)
    return int(bench_cli.main(args))


def test_short_gil_switches_while_measuring_and_restored_after():
    import sys

    from tui.core.pauses import GIL_SWITCH_INTERVAL_S, short_gil_switches

    before = sys.getswitchinterval()
    with short_gil_switches():
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == before


def test_the_bench_command_measures_with_short_gil_switches(monkeypatch, tmp_path):
    import sys

    from tui.bench.run import runner as runner_module
    from tui.core.pauses import GIL_SWITCH_INTERVAL_S

    seen: list[float] = []
    real_run = runner_module.BenchRunner.run

    async def run(self):  # type: ignore[no-untyped-def]
        seen.append(sys.getswitchinterval())
        return await real_run(self)

    monkeypatch.setattr(runner_module.BenchRunner, "run", run)
    assert _tiny_bench(tmp_path) == 0
    assert seen == [pytest.approx(GIL_SWITCH_INTERVAL_S)]


def test_collector_paused_inside_and_as_it_was_after():
    from tui.core.pauses import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
        gc.unfreeze()  # what it froze, back to the collector of this test process


def test_the_bench_command_builds_its_report_with_the_collector_paused(monkeypatch, tmp_path):
    """The report makes an object per chunk stamp; the collections those allocations set
    off would rescan every record (tui/core/pauses.py)."""

    from tui.bench.report import files as report_module

    seen: list[bool] = []
    real_build = report_module.build_report

    def build_report(*a, **k):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return real_build(*a, **k)

    monkeypatch.setattr(report_module, "build_report", build_report)
    assert _tiny_bench(tmp_path) == 0
    assert seen[-1] is False  # the final report (checkpoints may come before it)
    assert gc.isenabled()
    gc.unfreeze()
