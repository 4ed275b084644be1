"""The open-loop part of a bench for one engine: the ``--rate`` level (any arrival
process, with a ramp and a duration limit) and the ``--find-capacity`` search, each
level between the engine-truth scrapes the concurrency levels get.

Called by the runner (tui/bench/run/runner.py) with itself, after the concurrency
levels, so the search can start from the measured c=1 pace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tui.bench.run.capacity import find_capacity
from tui.bench.run.level_truth import LevelTruth
from tui.bench.run.loads import RequestDriver
from tui.bench.run.open_loop import run_arrivals
from tui.bench.run.records import LevelRun
from tui.core.pauses import settle_heap, streaming
from tui.engines.base import Engine


async def run_open_levels(runner: Any, engine: Engine, run: Any, driver: RequestDriver) -> None:
    """The --rate level, then the capacity search, as the plan asks (``run`` is the
    engine's EngineRun; ``runner`` the BenchRunner, for progress and truth)."""
    plan = runner.plan
    make = runner._maker(run)

    async def around(level: LevelRun, go: Callable[[], Awaitable[None]]) -> None:
        settle_heap()  # full collections between levels, never inside one
        runner._stage = (run.name, level.label)
        runner._emit()
        truth = LevelTruth(engine, None)
        await truth.begin()
        with streaming():
            await go()
        await runner._end_truth(truth, level)

    if plan.rate and not runner.stopped:
        spec = plan.arrival_spec(plan.rate)
        level = LevelRun(run.name, spec.label(), spec.kind(), rate=plan.rate)
        run.levels.append(level)

        async def go() -> None:
            await run_arrivals(driver, spec, make, level, drain_s=spec.duration_s)

        await around(level, go)
    if plan.find_capacity and not runner.stopped:
        run.capacity_search = await find_capacity(driver, make, plan, run.levels, run.name, around)
