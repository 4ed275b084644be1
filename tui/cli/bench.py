"""``infertop bench``: honest engine comparisons, written to a report folder.

Exit status: 0 done; 2 bad input (nothing was run); 3 an engine failed every request or
could not be loaded (the report is written and lists why); 130 stopped with Ctrl-C (a
partial report, marked partial, is written); 1 the report could not be written.
Imported to build the parser: keep module-level imports cheap (rich is imported lazily).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from tui.bench.report.shape import LevelSummary, Summary
from tui.bench.run.plan import PRESET_HELP, BenchError, BenchPlan, parse_concurrency, parse_slo
from tui.bench.run.workers import STREAMS_PER_WORKER, max_workers
from tui.cli.bench_load import add_load_arguments, load_values, print_slo_and_capacity
from tui.cli.bench_sweep import add_sweep_arguments, build_study, finish_study, print_sweep
from tui.cli.common import add_insecure_argument
from tui.cli.ledger_args import add_ledger_arguments
from tui.core.safe_text import terminal_label

EXIT_OK, EXIT_WRITE, EXIT_USAGE, EXIT_ENGINE_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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
    a(
        "--out",
        required=True,
        metavar="DIR",
        help="report folder (created if needed, 0700; the reports are 0600: they hold every "
        "prompt and answer)",
    )
    a("--config", metavar="PATH", default=argparse.SUPPRESS, help="config file")


def build_plan(args: argparse.Namespace, engines: list[str]) -> BenchPlan:
    """Command line over preset over defaults; BenchError on bad values."""
    from tui.bench.run.plan import preset_values

    values: dict[str, Any] = preset_values(args.preset) if args.preset else {}
    explicit = {
        "runs": args.runs,
        "warmup": args.warmup,
        "rate": args.rate,
        "prompt_tokens": args.prompt_tokens,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "cold": args.cold,
        "workers": args.workers,
        **load_values(args),
    }
    if args.concurrency is not None:
        explicit["concurrency"] = parse_concurrency(args.concurrency)
    if args.slo is not None:
        explicit["slo"] = parse_slo(args.slo)
    if getattr(args, "depth", None) is not None:
        from tui.bench.run.depth import parse_depths

        explicit["depths"] = parse_depths(args.depth)
    values.update({k: v for k, v in explicit.items() if v is not None})
    plan = BenchPlan(engines=engines, preset=args.preset, **values)
    plan.validate()
    return plan


def resolve_engines(args: argparse.Namespace, cfg: Any) -> list[Any]:
    """EngineSpecs from --engine names (config), --url, or the config's default engine.

    A --url server's kind is detected exactly as ``infertop run --url`` does, so a
    llama-server keeps ``cache_prompt``, ``ignore_eos`` and its ``timings``."""
    from urllib.parse import urlparse

    from tui.engines.base import EngineError
    from tui.engines.kinds import find_kind, kind_names
    from tui.engines.servers.detect import spec_from_url
    from tui.transport.access import redact_url

    specs = []
    for name in dict.fromkeys(args.engine or []):
        specs.append(cfg.engine(name))
    for url in dict.fromkeys(args.url or []):
        parsed = urlparse(url)
        shown = redact_url(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BenchError(f"--url {shown!r}: expected http(s)://HOST:PORT")
        try:
            specs.append(spec_from_url(url, verify_tls=not args.insecure))
        except EngineError as e:
            raise BenchError(f"--url {shown}: {e}") from None
    if not specs:
        specs.append(cfg.engine(cfg.default_engine))
    for spec in specs:
        if find_kind(spec.kind) is None:
            known = ", ".join(kind_names())
            raise BenchError(f"engine {spec.name!r}: unknown kind {spec.kind!r} ({known})")
    return specs


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
    from tui.cli.ledger_args import open_ledger, say

    ledger = open_ledger(args, cfg, say("infertop bench"))
    try:
        return _run(plan, specs, out, study, energy, ledger, handoff)
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


def _run(
    plan: BenchPlan,
    specs: list[Any],
    out: Path,
    study: Any = None,
    energy: Any = None,
    ledger: Any = None,
    handoff: Any = None,
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
        if study is not None:
            finish_study(study, result, report)
        try:
            written = write_report_dict(report, out)
        except OSError as e:
            print(f"infertop bench: error: the report could not be written: {e}", file=sys.stderr)
            return EXIT_WRITE
    summary = report["summary"]
    _print_summary(summary, result.partial, result.partial_reason, written[-1])
    print_slo_and_capacity(summary)
    _print_own_cost(summary, report.get("own_cpu"))
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


def _ttfo_text(level: LevelSummary | None) -> str:
    """ ", TTFO 812.0 ms" where the level's median TTFO differs from its TTFT (a model that
    reasons answers after its thinking); "" where they are the same."""
    med = (level.get("medians") if level else None) or {}
    ttft, ttfo = med.get("ttft_ms"), med.get("ttfo_ms")
    if ttfo is None and level and level.get("reasoning"):
        return ", TTFO — (no answer after the thinking)"
    if not ttfo or ttfo == ttft:
        return ""
    return f", TTFO {ttfo['estimate']:.1f} ms"


def _energy_text(level: LevelSummary | None) -> str:
    """ ", 0.42 J/token (counter)" for the terminal's summary line; "" when unknown."""
    e = (level.get("energy") if level else None) or {}
    jpt = e.get("j_per_token")
    if jpt is None:
        return ""
    return f", {jpt:.3g} J/token ({'estimate' if e.get('estimated') else 'counter'})"


def _print_own_cost(summary: Summary, own: dict[str, Any] | None) -> None:
    """What the bench itself cost: its CPU, and the requests it made that were not
    measured (per engine: before the levels, then per level; report.md has the detail)."""
    for e in summary["engines"]:
        made = sum((e.get("setup_requests") or {}).values())
        per_level = [f"{lv['label']} {sum(lv['extra_requests'].values())}" for lv in e["levels"]]
        if made or per_level:
            print(
                f"{e['name']}: unmeasured requests: {made} before the levels"
                + (f"; per level: {', '.join(per_level)}" if per_level else "")
            )
    if own:
        print(
            f"infertop's own CPU: {own['percent_of_a_core']:.1f}% of a core over "
            f"{own['wall_s']:.1f} s (this process"
            + (" and its worker processes" if own.get("helpers_cpu_s") else "")
            + "; engines in their own processes not included)"
        )


def _print_summary(summary: Summary, partial: bool, reason: str | None, path: Path) -> None:
    def fmt(iv: Any, unit: str) -> str:
        return "—" if not iv else f"{iv['estimate']:.1f} {unit}"

    if partial:
        print(f"PARTIAL REPORT ({reason})")
    for e in summary["engines"]:
        if e["error"]:
            print(f"{e['name']}: FAILED: {terminal_label(e['error'], 2000)}")
            continue
        head = next((lv for lv in e["levels"] if lv["label"] == e["headline"]), None)
        med = head["medians"] if head else {}
        print(
            f"{e['name']}: {e['ok']} ok, {e['failed']} failed"
            + (f", {e['cancelled']} cancelled" if e["cancelled"] else "")
            + f"; decode {fmt(med.get('decode_tps'), 'tok/s')}"
            + f", TTFT {fmt(med.get('ttft_ms'), 'ms')}"
            + _ttfo_text(head)
            + _energy_text(head)
        )
        for d in e.get("depth") or []:
            med = d["medians"]
            print(
                f"  depth {d['depth']} (counted {d['counted_depth']}): decode "
                f"{fmt(med.get('decode_tps'), 'tok/s')}, TTFT {fmt(med.get('ttft_ms'), 'ms')}"
            )
        alpha = (e.get("batching") or {}).get("alpha")
        if alpha:
            ns = ",".join(str(r["concurrency"]) for r in e["batching"]["levels"])
            print(
                f"  batching model α = {alpha['estimate']:.3f} "
                f"[{alpha['low']:.3f}, {alpha['high']:.3f}] (N = {ns})"
            )
        if e["all_failed"] and e["failures"]:
            first = terminal_label(e["failures"][0]["message"], 2000)
            print(f"  every request failed; first error: {first}")
        for w in e["warnings"]:
            print(f"  warning: {terminal_label(w, 2000)}")
    print(f"report: {path.parent}")
