"""``infertop bench``'s run: the runner driven under a progress display (Ctrl-C once
writes a partial report, twice quits), then the report written and summed up; its
result is the command's exit status."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from tui.bench.run.plan import BenchPlan
from tui.cli.bench_build import BuildMark
from tui.cli.bench_load import print_slo_and_capacity
from tui.cli.bench_summary import print_own_cost, print_summary
from tui.cli.bench_sweep import finish_study, print_sweep

EXIT_OK, EXIT_WRITE, EXIT_USAGE, EXIT_ENGINE_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def run_bench(
    plan: BenchPlan,
    specs: list[Any],
    out: Path,
    study: Any = None,
    energy: Any = None,
    ledger: Any = None,
    handoff: Any = None,
    builds: BuildMark | None = None,
) -> int:
    from tui.bench.report.files import (
        CHECKPOINT_BOOT,
        build_report,
        write_report,
        write_report_dict,
    )
    from tui.bench.run import event_loop
    from tui.bench.run.environment import environment
    from tui.bench.run.runner import BenchRunner
    from tui.cli.bench_progress import progress_display
    from tui.core.pauses import collector_paused, settle_heap, short_gil_switches

    with progress_display() as display:
        runner = BenchRunner(plan, specs, on_update=display.update, environment=environment())
        if ledger is not None:
            runner.outcomes.add(ledger)
        if study is not None:
            runner.engine_factory = study.engine_factory
            runner.before_close = study.before_close
        if handoff is not None:
            for sink in handoff.sinks:
                runner.outcomes.add(sink)
            runner.trace = (
                "propagate" if handoff.propagate else "record" if handoff.recording else "off"
            )
        # Everything imported and built so far lives to the end: out of the collector's
        # way, so its full collections during the bench scan only what the bench makes.
        # The runner defers full collections inside each level; the GIL hand-over is
        # short while measuring, as in the TUI (tui/core/pauses.py).
        settle_heap()
        if builds is not None:
            builds.start()

        def checkpoint(result: Any) -> None:
            try:
                write_report(result, out, CHECKPOINT_BOOT)
            except OSError as e:
                display.message(f"checkpoint not written: {e}")

        runner.checkpoint = checkpoint
        if energy is not None:
            runner.result.energy, runner.result.energy_source = energy.track, energy.describe()
            energy.start()
        try:
            with short_gil_switches():
                result = event_loop.run(_run_with_sigint(runner, display))
        finally:
            if energy is not None:
                energy.stop()
    with collector_paused():  # the report is acyclic: an object per chunk stamp
        report = build_report(result)
        if builds is not None:  # a build that started while it measured
            builds.mark(report)
        if study is not None:
            finish_study(study, result, report)
        try:
            written = write_report_dict(report, out)
        except OSError as e:
            print(f"infertop bench: error: the report could not be written: {e}", file=sys.stderr)
            return EXIT_WRITE
    summary = report["summary"]
    print_summary(summary, result.partial, result.partial_reason, written[-1])
    BuildMark.say(report)
    print_slo_and_capacity(summary)
    print_own_cost(summary, report.get("own_cpu"))
    print_sweep(report)
    if result.partial:
        return EXIT_INTERRUPTED
    if any(e["all_failed"] for e in summary["engines"]):
        return EXIT_ENGINE_FAILED
    return EXIT_OK


async def _run_with_sigint(runner: Any, display: Any) -> Any:
    loop = asyncio.get_running_loop()
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            display.message(
                "stopping: cancelling requests, writing a partial report "
                "(Ctrl-C again to quit at once)"
            )
            runner.stop("interrupted (Ctrl-C)")
        else:
            loop.remove_signal_handler(signal.SIGINT)
            raise KeyboardInterrupt

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError):  # not the main thread / no signals
        pass
    try:
        return await runner.run()
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
