"""``infertop bench``: honest engine comparisons, written to a report folder.

Exit status: 0 done; 2 bad input (nothing was run); 3 an engine failed every request or
could not be loaded (the report is written and lists why); 130 stopped with Ctrl-C (a
partial report, marked partial, is written); 1 the report could not be written.
Imported to build the parser: keep module-level imports cheap (rich is imported lazily).
Here: its options and the checks before anything runs; its parts: bench_plan.py (the plan
and engines from the command line), bench_run.py (the run, the report, the exit codes),
bench_summary.py (the summary on the terminal).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tui.bench.run.plan import PRESET_HELP, BenchError
from tui.bench.run.workers import STREAMS_PER_WORKER, max_workers
from tui.cli.bench_build import BuildRunning, add_build_argument, gate
from tui.cli.bench_load import add_load_arguments
from tui.cli.bench_plan import build_plan as build_plan
from tui.cli.bench_plan import resolve_engines as resolve_engines
from tui.cli.bench_run import EXIT_INTERRUPTED, EXIT_USAGE, run_bench
from tui.cli.bench_sweep import add_sweep_arguments, build_study
from tui.cli.common import add_insecure_argument
from tui.cli.ledger_args import add_ledger_arguments
from tui.core.safe_text import terminal_label


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tui.cli.handoff import add_otel_arguments

    add_otel_arguments(p, own_requests=False)
    p.epilog = (
        "Exit status: 0 done, 2 bad input, 3 an engine failed every request, "
        "130 stopped (partial report), 1 report not written. Presets: "
        + "; ".join(f"{k}: {v}" for k, v in PRESET_HELP.items())
    )
    a = p.add_argument
    a("--engine", action="append", metavar="NAME", help="engine from config (repeatable)")
    a(
        "--url",
        action="append",
        metavar="URL",
        help="a server; its kind (llama-server, vLLM, Ollama, OpenAI) is detected (repeatable)",
    )
    add_insecure_argument(p)
    a("--runs", type=int, metavar="N", help="requests per worker per level (default 10)")
    a("--warmup", type=int, metavar="N", help="warm-up requests per engine (default 1)")
    a(
        "--concurrency",
        metavar="LIST",
        help="concurrency levels, e.g. 1,8,16 (default 1; none: only --rate / --find-capacity)",
    )
    a("--rate", type=float, metavar="R", help="add an open-loop level at R requests/s (--arrival)")
    a("--prompt-tokens", type=int, metavar="N", help="prompt length in tokens (default 128)")
    a("--max-tokens", type=int, metavar="N", help="output tokens per request (default 128)")
    a(
        "--depth",
        metavar="LIST",
        help="also measure with this many tokens of prior context, e.g. 0,1024,4096 "
        "(counted by the engine; concurrency 1, --runs requests each)",
    )
    a("--temperature", type=float, metavar="T", help="sampling temperature (default 0.7)")
    a("--cold", action="store_true", default=None, help="also measure cold starts")
    a("--preset", metavar="NAME", help="a named protocol: " + ", ".join(PRESET_HELP))
    a("--slo", metavar="K=MS,...", help="goodput SLOs: ttft_ms, ttfo_ms, tpot_ms, itl_ms, e2e_ms")
    a(
        "--workers",
        type=int,
        metavar="N",
        help="client processes for HTTP engines' concurrency levels, each streaming a share "
        "of the requests on its own event loop (records merged); default: one per "
        f"{STREAMS_PER_WORKER} concurrent streams, at most cores - 1 (here "
        f"{max_workers()})",
    )
    a(
        "--energy",
        metavar="SOURCE",
        help="hardware whose energy per token is measured: 'local', ssh://[user@]host or an "
        "exporter URL, or 'off' (default: the engines' common `telemetry`, else local)",
    )
    add_load_arguments(p)
    add_sweep_arguments(p)
    add_ledger_arguments(p)
    add_build_argument(p)
    a(
        "--out",
        required=True,
        metavar="DIR",
        help="report folder (created if needed, 0700; the reports are 0600: they hold every "
        "prompt and answer)",
    )
    a("--config", metavar="PATH", default=argparse.SUPPRESS, help="config file")


def main(args: argparse.Namespace) -> int:
    from tui.cli.common import show_notices
    from tui.config import ConfigError, load_config

    try:
        cfg = load_config(getattr(args, "config", None))
        show_notices(cfg)
        specs = resolve_engines(args, cfg)
        plan = build_plan(args, [s.name for s in specs])
        study = build_study(args, specs)
        if study is not None:
            specs = study.specs()
            plan.engines = [s.name for s in specs]
        if plan.depths:
            from tui.bench.run.depth import check_spec_contexts

            check_spec_contexts(plan, specs)
        from tui.bench.report.atomic import prepare_out_dir

        out = prepare_out_dir(Path(args.out).expanduser())
    except (BenchError, ConfigError) as e:
        print(f"infertop bench: error: {terminal_label(e, 2000)}", file=sys.stderr)
        return EXIT_USAGE
    from tui.cli.common import CLIError
    from tui.cli.handoff import build_handoff, note_line

    try:
        handoff = build_handoff(
            args, cfg, note=note_line("infertop bench"), own_requests=False, alerts=False
        )
    except CLIError as e:
        print(f"infertop bench: error: {terminal_label(e, 2000)}", file=sys.stderr)
        return EXIT_USAGE
    if plan.n_ctx is not None:
        for spec in specs:
            spec.n_ctx = plan.n_ctx
    try:
        energy = _energy(getattr(args, "energy", None), specs)
    except ValueError as e:  # SourceError
        print(f"infertop bench: error: --energy: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        builds = gate(getattr(args, "while_building", "wait"))  # never beside a compile
    except BuildRunning as e:
        print(f"infertop bench: error: {terminal_label(e, 2000)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    from tui.cli.ledger_args import open_ledger, say

    ledger = open_ledger(args, cfg, say("infertop bench"))
    try:
        return run_bench(plan, specs, out, study, energy, ledger, handoff, builds)
    finally:
        if ledger is not None:
            ledger.close()
        if handoff.exporter is not None and not handoff.exporter.flush(10.0):
            note_line("infertop bench")("OTLP export did not complete before the end")
        handoff.close()


def _energy(asked: str | None, specs: list[Any]) -> Any:
    """The sampler of the bench's energy figures (tui/bench/energy.py), or None: off."""
    from tui.bench.stats.energy import BenchEnergy, choose_source

    source = choose_source(asked, [getattr(s, "telemetry", None) for s in specs])
    return None if source is None else BenchEnergy(source)
