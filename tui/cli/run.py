"""``infertop run``: stream one prompt to stdout, then print its metrics (or JSON).

Here: its options and main; its parts: run_request.py (the one request through the chat
core, the hardware sampled over it), run_output.py (the echo, the summary, the JSON)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from tui.cli.common import CLIError, add_engine_arguments, engine_spec, fail, load
from tui.cli.handoff import build_handoff, note_line
from tui.cli.ledger_args import add_ledger_arguments
from tui.cli.run_output import ENERGY_NONE, format_summary, result_dict, to_terminal
from tui.cli.run_request import content_tap, open_hardware, run_request
from tui.core.metrics import compute_metrics
from tui.core.outcome import Outcomes
from tui.core.safe_text import terminal_label
from tui.core.trace_context import continue_or_start
from tui.core.verdict_text import breakdown_line
from tui.engines.base import EngineError, GenerationRequest


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", required=True, help="the prompt text")
    add_engine_arguments(p)
    p.add_argument("--max-tokens", type=int, help="tokens to generate at most (default: config)")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: config)")
    p.add_argument("--seed", type=int, help="sampling seed")
    p.add_argument(
        "--no-cache-prompt",
        action="store_true",
        help="no prompt-prefix reuse: a cold, fair prefill",
    )
    p.add_argument(
        "--telemetry",
        metavar="SOURCE",
        help="sample this hardware while the request runs and print what it did, and the "
        "energy per output token: 'local', ssh://[user@]host[:port] or an exporter URL "
        "(default: the engine's `telemetry` in config, else none)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object instead (the model's text raw, escaped by JSON itself)",
    )
    from tui.cli.handoff import add_otel_arguments

    add_otel_arguments(p)
    add_ledger_arguments(p)
    p.epilog = RUN_EPILOG


RUN_EPILOG = (
    "Model text is untrusted: written to a terminal, its control characters (ESC, BEL, "
    "C1, ...) are shown as visible symbols (␛, ␇, �), never obeyed. Piped or redirected "
    "(`run | cat`, `> file`), the text passes through unchanged. Model names, finish "
    "reasons and error messages are always filtered."
)


def main(args: argparse.Namespace) -> int:
    try:
        cfg = load(args)
        spec = engine_spec(args, cfg)
        gen = cfg.generation
        request = GenerationRequest.from_prompt(
            args.prompt,
            max_tokens=gen.max_tokens if args.max_tokens is None else args.max_tokens,
            temperature=gen.temperature if args.temperature is None else args.temperature,
            top_p=gen.top_p,
            seed=args.seed if args.seed is not None else gen.seed,
            cache_prompt=not args.no_cache_prompt,
        )
        request.validate()
        from tui.engines.kinds import engine_class

        engine_class(spec.kind)  # unknown kinds fail before any loading
        handoff = build_handoff(args, cfg, note=note_line("infertop"), alerts=False)
        hardware = open_hardware(args.telemetry or spec.telemetry, cfg)
    except CLIError as e:
        return fail(str(e), e.code)
    except EngineError as e:
        return fail(str(e))
    if handoff.recording:
        request.trace = continue_or_start(None)
        request.send_traceparent = handoff.propagate
    from tui.cli.ledger_args import open_ledger, say

    outcomes = Outcomes()
    ledger = open_ledger(args, cfg, say("infertop run"))
    if ledger is not None:
        outcomes.add(ledger)
    for sink in handoff.sinks:
        outcomes.add(sink)
    try:
        info, load_ms, timeline, own, verdict, disturbed = asyncio.run(
            run_request(
                cfg,
                spec,
                request,
                echo=not args.json,
                hardware=hardware,
                raw=not to_terminal(),
                outcomes=outcomes,
                content_tap=content_tap(handoff.exporter),
            )
        )
    except EngineError as e:
        return fail(str(e), 1)
    finally:
        if hardware is not None:
            hardware.stop()
        if handoff.exporter is not None and not handoff.exporter.flush(cfg.otel.timeout_s + 1):
            note_line("infertop")(f"OTLP export to {handoff.exporter.endpoint} did not complete")
        outcomes.close()
        handoff.close()
    metrics = compute_metrics(timeline)
    summary = hardware.summary() if hardware is not None else None
    energy = (
        hardware.window.energy(timeline.t_sent_ns, timeline.t_end_ns, metrics.output_tokens)
        if hardware is not None
        else None
    )
    trace_id = request.trace.trace_id if request.trace is not None else None
    if args.json:
        result = result_dict(info, load_ms, timeline, metrics)
        result["trace_id"] = trace_id
        result["verdict"] = verdict.to_dict() if verdict is not None else None
        result["disturbed"] = disturbed
        result["hardware"] = summary.to_dict() if summary is not None else None
        result["energy"] = energy.to_dict() if energy is not None else None
        result["own_cpu"] = own.to_dict()
        print(json.dumps(result, indent=2))
    else:
        print()
        print(
            format_summary(
                info, load_ms, metrics, timeline.stamp_source, disturbed, timeline.response_model
            )
        )
        if trace_id is not None:
            print(f"trace: {trace_id}")
        if verdict is not None:
            print(terminal_label(f"why: {verdict.text}", 400))
            print(terminal_label(f"     {breakdown_line(verdict.breakdown)}", 400))
        print(own.describe())
        if summary is not None:
            from tui.telemetry.summary import format_line

            print(terminal_label(format_line(summary), 4000))  # names from a remote box
            print(energy.describe() if energy is not None else ENERGY_NONE)
    if timeline.error:
        if not args.json:
            print(f"infertop: error: {terminal_label(timeline.error, 2000)}", file=sys.stderr)
        return 1
    return 0
