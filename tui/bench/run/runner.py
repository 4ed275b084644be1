"""BenchRunner: runs a :class:`~tui.bench.run.plan.BenchPlan` against engines, one at a time.

Per engine: build and load it (timed), check fairness (parallel capacity, prompt length),
cold starts when asked, warm-up, then every load level. Engines run one after another so
they never compete for the machine. Progress goes to an ``on_update`` callback (called on
the runner's event loop thread). :meth:`BenchRunner.stop` may be called from any thread:
no new request starts, those in flight are cancelled, and the result is marked partial.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from tui.bench.run import hooks
from tui.bench.run.depth import DepthSweep, depths_refused
from tui.bench.run.fairness import check_fairness
from tui.bench.run.level_truth import LevelTruth, pause_between
from tui.bench.run.loads import (
    RequestDriver,
    run_concurrency,
    run_sequential,
)
from tui.bench.run.open_levels import run_open_levels
from tui.bench.run.plan import BenchPlan
from tui.bench.run.published import HeldOutcomes
from tui.bench.run.records import LevelRun, RequestRecord
from tui.bench.run.results import (
    BenchResult,
    BenchUpdate,
    EngineRun,
    setup_requests,
    spec_for_report,
    utc_now,
)
from tui.bench.run.sessions import run_sessions
from tui.bench.run.workers import WorkerJob, default_workers, run_level_in_workers, split_streams
from tui.bench.run.workload import request_maker
from tui.core.outcome import Outcomes
from tui.core.pauses import settle_heap, streaming
from tui.core.trace_context import TraceMode
from tui.engines.base import Engine, EngineError, EngineSpec, GenerationRequest
from tui.engines.http.http_engine import HttpStreamEngine
from tui.engines.registry import create_engine
from tui.telemetry.own_cpu import ProcessCpuWindow
from tui.transport.reader_loop import HttpReader

CHECKPOINT_EVERY_S = 30.0  # also write the (partial) report this often inside a level
# Overrides CHECKPOINT_EVERY_S (seconds, >= 0), read when a runner is made: tests that
# kill a bench mid-write want checkpoints often. The share below still bounds them.
CHECKPOINT_ENV = "INFERTOP_BENCH_CHECKPOINT_S"
# ...but never let checkpoints take more than this share of the wall time: a checkpoint
# rebuilds the whole report on the measuring process's main thread (CPU and GIL).
CHECKPOINT_MAX_SHARE = 0.05


def checkpoint_floor_s() -> float:
    """The least time between checkpoints: ``$INFERTOP_BENCH_CHECKPOINT_S`` when it is a
    number >= 0, else :data:`CHECKPOINT_EVERY_S`."""
    try:
        value = float(os.environ.get(CHECKPOINT_ENV, ""))
    except ValueError:
        return CHECKPOINT_EVERY_S
    return value if 0 <= value < math.inf else CHECKPOINT_EVERY_S


class BenchRunner:
    def __init__(
        self,
        plan: BenchPlan,
        specs: list[EngineSpec],
        on_update: Callable[[BenchUpdate], object] | None = None,
        engine_factory: Callable[[EngineSpec], Engine] = create_engine,
        environment: dict[str, Any] | None = None,
        outcomes: Outcomes | None = None,
    ) -> None:
        self.plan = plan
        # every request the bench sends is published here (tui/core/outcome.py)
        self.outcomes = outcomes if outcomes is not None else Outcomes()
        self.specs = specs
        self.on_update = on_update
        self.engine_factory = engine_factory
        self.result = BenchResult(plan=plan, started_at=utc_now(), environment=environment or {})
        # ... each when its level ends, with its verdict (tui/bench/run/published.py)
        self.held = HeldOutcomes(self.outcomes, self.result.engines, specs)
        self._stop = threading.Event()
        self._stop_reason = "interrupted"
        self._driver: RequestDriver | None = None
        self._t0_ns = time.perf_counter_ns()
        self._done = 0
        self._total = plan.requests_per_engine() * len(specs)
        self._stage = ("", "")
        self._last_engine = True
        self.checkpoint: Callable[[BenchResult], None] | None = None
        # each request's trace context (tui/bench/run/loads.py RequestDriver.trace)
        self.trace: TraceMode = "off"
        # called with (engine, its EngineRun) after its last level, before it closes
        self.before_close: Callable[[Engine, EngineRun], Awaitable[None]] | None = None
        self._saved_at = time.monotonic()
        self._checkpoint_floor_s = checkpoint_floor_s()
        self._checkpoint_every_s = self._checkpoint_floor_s
        # client processes per concurrency level (HTTP engines); the report's plan says it
        if plan.workers is None:  # worker processes build only the default prompts
            most = max(plan.concurrency, default=1)
            plan.workers = 1 if plan.has_workload() else default_workers(most)
        self.workers = plan.workers
        self._helpers_cpu_s = 0.0  # CPU seconds of the --workers processes, as they end

    # --- control -------------------------------------------------------------------
    def stop(self, reason: str = "interrupted") -> None:
        """Stop from any thread: no new requests; in-flight ones are cancelled."""
        self._stop_reason = reason
        self._stop.set()
        driver = self._driver
        if driver is not None:
            driver.cancel_all()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # --- progress ------------------------------------------------------------------
    def _elapsed(self) -> float:
        return (time.perf_counter_ns() - self._t0_ns) / 1e9

    def _emit(self, record: RequestRecord | None = None, message: str | None = None) -> None:
        if self.on_update is None:
            return
        elapsed = self._elapsed()
        eta = None
        if self._done:
            eta = elapsed / self._done * max(0, self._total - self._done)
        engine, stage = self._stage
        self.on_update(
            BenchUpdate(self._done, self._total, engine, stage, elapsed, eta, record, message)
        )

    def _on_record(self, record: RequestRecord) -> None:
        if record.prompt_tokens_target is None and not self.plan.has_workload():
            record.prompt_tokens_target = self.plan.prompt_tokens
        if record.phase != "calibrate":
            self._done += 1
        self._emit(record)
        if time.monotonic() - self._saved_at > self._checkpoint_every_s:
            # a long level is not lost to a crash; engines stamp their own events (in
            # their threads), so this write does not shift measured times
            self._save()

    def _save(self) -> None:
        t0 = time.monotonic()
        if self.checkpoint is not None:
            self.checkpoint(self.result)
        self._saved_at = time.monotonic()
        cost = self._saved_at - t0
        self._checkpoint_every_s = max(self._checkpoint_floor_s, cost / CHECKPOINT_MAX_SHARE)

    # --- the bench -----------------------------------------------------------------
    async def run(self) -> BenchResult:
        # HTTP engines read on this loop: nothing else runs here, and a hand-off to a
        # reader thread per read cost more CPU than the parsing (tui/transport/reader_loop)
        with HttpReader.on_running_loop():
            try:
                return await self._run_all()
            finally:
                self.held.close()

    async def _run_all(self) -> BenchResult:
        own = ProcessCpuWindow()
        for k, spec in enumerate(self.specs):
            if self.stopped:
                break
            self._last_engine = k == len(self.specs) - 1
            run = EngineRun(spec.name, spec.kind, spec_for_report(spec))
            self.result.engines.append(run)
            await self._run_engine(spec, run)
            if run.error is not None:
                # its planned requests will never happen: keep the total honest
                self._total -= self.plan.requests_per_engine()
            if not self._last_engine:
                self._save()  # after the last one the caller writes the final report
        self.result.finished_at = utc_now()
        self.result.own_cpu = own.end(helpers_cpu_s=self._helpers_cpu_s).to_dict()
        self.result.partial = self.stopped
        self.result.partial_reason = self._stop_reason if self.stopped else None
        return self.result

    async def _run_engine(self, spec: EngineSpec, run: EngineRun) -> None:
        self._stage = (spec.name, "loading")
        self._emit(message=f"{spec.name}: loading")
        try:
            engine = self.engine_factory(spec)
            run.load_ms = await engine.load()
        except EngineError as e:
            run.error = str(e)
            self._emit(message=f"{spec.name}: {e}")
            return
        except Exception as e:  # noqa: BLE001 - reported, the bench goes on
            run.error = f"{type(e).__name__}: {e}"
            self._emit(message=f"{spec.name}: {run.error}")
            return
        driver = RequestDriver(
            engine, spec.name, self._t0_ns, self._stop, self._on_record, self.held
        )
        driver.trace = self.trace
        self._driver = driver
        try:
            try:
                run.info = engine.info().to_dict()
            except Exception as e:  # noqa: BLE001
                run.warnings.append(f"engine info unavailable: {e}")
            if self.plan.depths and (refused := depths_refused(self.plan, run)):
                self._emit(message=f"{run.name}: {refused}")
                return
            self._stage = (run.name, "fairness checks")
            await check_fairness(
                engine, run, driver, self.plan, self._request, lambda: self.stopped
            )
            driver.level_ended()  # the calibration probes
            if self.plan.cold and not self.stopped:
                await self._cold(engine, run, driver)
            self._stage = (spec.name, "warm-up")
            with streaming():
                run.warmup = await run_sequential(
                    driver, self.plan.warmup, self._maker(run, "warmup"), "warmup", "warmup"
                )
            driver.level_ended()
            run.setup_requests = setup_requests(engine, run)
            for c in self.plan.concurrency:
                if self.stopped:
                    break
                settle_heap()  # full collections between levels, never inside one
                self._stage = (spec.name, f"c={c}")
                level = LevelRun(spec.name, f"c={c}", "concurrency", concurrency=c)
                run.levels.append(level)  # listed before it runs: checkpoints include it
                truth = LevelTruth(engine, c)
                await truth.begin()
                with streaming():
                    await self._concurrency_level(engine, run, driver, c, level)
                await self._end_truth(truth, level)
                more = self.plan.rate or self.plan.find_capacity or self.plan.depths
                more = more or not self._last_engine
                if more or c != self.plan.concurrency[-1]:
                    self._save()  # more to run (the final report follows the last level)
            if (self.plan.rate or self.plan.find_capacity) and not self.stopped:
                await run_open_levels(self, engine, run, driver)
            if self.plan.depths and not self.stopped:

                def stage(text: str) -> None:
                    self._stage = (spec.name, text)
                    self._emit()

                sweep = DepthSweep(engine, run, driver, self._request, self.plan.seed, stage)
                await sweep.run_all(self.plan.depths, self.plan.runs)
        finally:
            self._driver = None
            self.held.engine_ended(spec.name)
            if self.before_close is not None:
                try:
                    await self.before_close(engine, run)
                except Exception as e:  # noqa: BLE001 - a note, not a reason to stop
                    run.warnings.append(f"measuring {run.name} before closing failed: {e}")
            try:
                await engine.close()
            except Exception as e:  # noqa: BLE001
                run.warnings.append(f"closing the engine failed: {e}")

    async def _end_truth(self, truth: LevelTruth, level: LevelRun) -> None:
        """After a level: the engine's account of it, and what the bench sent that was not
        measured; at c = 1 with per-request scrapes, the time between requests is left
        out of the level's wall time (tui/bench/level_truth.py)."""
        finished = sum(1 for r in level.records if r.status not in ("cancelled", "cut"))
        level.engine_truth, level.extra_requests = await truth.end(finished)
        self.held.level_ended(level.engine)  # its requests' verdicts, then their outcomes
        level_scrapes = 2 if level.engine_truth is not None else 0
        per_request = level.extra_requests.get("GET /metrics", 0) - level_scrapes
        if level.concurrency == 1 and per_request > 0:
            level.paused_s = pause_between(level.records)

    async def _concurrency_level(
        self, engine: Engine, run: EngineRun, driver: RequestDriver, c: int, level: LevelRun
    ) -> None:
        """Level c in this process, or split across worker processes (tui/bench/workers)."""
        n = self.workers if isinstance(engine, HttpStreamEngine) else 1
        shares = split_streams(c, n)
        if self.plan.turns > 1:  # conversations (tui/bench/run/sessions.py): in this process
            await run_sessions(driver, c, self.plan.runs, self.plan.turns, self._maker(run), level)
            return
        if len(shares) <= 1:
            await run_concurrency(driver, c, self.plan.runs, self._maker(run), level)
            return
        spec = next(s for s in self.specs if s.name == run.name)
        plan = self.plan
        jobs = []
        for w, streams in enumerate(shares, start=1):
            first = driver.next_index()
            driver._next_index = first + streams * plan.runs  # this worker's prompt numbers
            jobs.append(
                WorkerJob(
                    w,
                    spec,
                    run.name,
                    level.label,
                    c,
                    streams,
                    plan.runs,
                    first,
                    self._t0_ns,
                    plan.max_tokens,
                    plan.temperature,
                    plan.seed,
                    run.prompt,
                    driver.trace,
                )
            )
        try:
            level.complete = await run_level_in_workers(
                jobs,
                level.records,
                partial(self._worker_record, driver=driver),
                lambda: self.stopped,
                partial(self._worker_ended, level=level),
            )
        except RuntimeError as e:
            level.complete = False
            run.warnings.append(f"{level.label}: the worker processes failed: {e}")
            self._emit(message=f"{run.name} {level.label}: {e}")

    def _worker_record(self, record: RequestRecord, driver: RequestDriver) -> None:
        """A record from a worker process: published, then as the bench's own."""
        driver.publish(record)
        self._on_record(record)

    def _worker_ended(self, cpu_s: float, calls: dict[str, int], level: LevelRun) -> None:
        """A --workers process ended: its CPU is the bench's; its small calls (its own
        engine's load) are requests the bench made that were not measured."""
        self._helpers_cpu_s += cpu_s
        for call, n in calls.items():
            key = f"{call} (worker processes)"
            level.extra_requests[key] = level.extra_requests.get(key, 0) + n

    def _request(self, text: str, max_tokens: int | None = None) -> GenerationRequest:
        return GenerationRequest.from_prompt(
            text,
            max_tokens=max_tokens or self.plan.max_tokens,
            temperature=self.plan.temperature,
            cache_prompt=False,
            ignore_eos=True,
        )

    def _maker(self, run: EngineRun, phase: str = "warm") -> Callable[[int], GenerationRequest]:
        assert run.prompt is not None
        return request_maker(self.plan, run.prompt, self._request)  # tui/bench/run/workload

    async def _cold(self, engine: Engine, run: EngineRun, driver: RequestDriver) -> None:
        self._stage = (run.name, "cold")
        level = LevelRun(run.name, "cold", "cold", concurrency=1)
        run.cold = level
        if run.cold_method is None:
            self._total -= self.plan.cold_runs  # planned but impossible
            return
        make = self._maker(run)
        for k in range(self.plan.cold_runs):
            if self.stopped:
                break
            try:
                ms = await hooks.force_cold(engine)
            except EngineError as e:
                run.cold_note = f"forcing a cold start failed: {e}"
                self._total -= self.plan.cold_runs - k
                break
            i = driver.next_index()
            with streaming():
                rec = await driver.run(make(i), "cold", "cold", i, concurrency=1, load_ms=ms)
            if ms is None and rec.timeline.truth is not None:
                rec.load_ms = rec.timeline.truth.load_ms  # reported by the engine (Ollama)
            level.records.append(rec)
        level.complete = not self.stopped
        driver.level_ended()


def run_bench(runner: BenchRunner) -> BenchResult:
    """Run a bench on a fresh event loop (for threads: the TUI runs it off its own loop)."""
    return asyncio.run(runner.run())
