"""``infertop run``: stream one prompt to stdout, then print its metrics (or JSON)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from typing import Any

from tui.cli.common import CLIError, add_engine_arguments, engine_spec, fail, load
from tui.cli.handoff import build_handoff, note_line
from tui.cli.ledger_args import add_ledger_arguments
from tui.config import Config
from tui.core.events import REASONING, StreamEvent, TextChunk
from tui.core.metrics import RequestMetrics, compute_metrics
from tui.core.outcome import Outcomes
from tui.core.safe_text import terminal_label, terminal_safe
from tui.core.timeline import RequestTimeline
from tui.core.trace_context import continue_or_start
from tui.core.verdict import Verdict
from tui.core.verdict_text import breakdown_line
from tui.engines.base import EngineError, EngineInfo, GenerationRequest
from tui.telemetry.own_cpu import ProcessCpu, ProcessCpuWindow


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
        hardware = _hardware(args.telemetry or spec.telemetry, cfg)
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
            _run(
                cfg,
                spec,
                request,
                echo=not args.json,
                hardware=hardware,
                raw=not _to_terminal(),
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
        print(format_summary(info, load_ms, metrics, timeline.stamp_source, disturbed))
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


READY_WAIT_S = 15.0  # --telemetry: longest wait for a remote source's first reading
ENERGY_NONE = "energy: unknown (the source reported no energy counter and no power)"


class _Hardware:
    """A source sampled in its own thread while the request runs (--telemetry)."""

    def __init__(self, source: Any, label: str, interval_s: float) -> None:
        from tui.telemetry.sampler import TelemetrySampler
        from tui.telemetry.summary import HardwareWindow

        self.label = label
        self.window = HardwareWindow()
        self.sampler = TelemetrySampler(interval_s, source=source, on_sample=self.window.add)
        self.sampler.start()  # before the engine loads: an SSH link connects meanwhile

    def begin(self) -> None:
        """The request starts: once the source has a first reading (or has failed)."""
        self.window.wait_ready(READY_WAIT_S)
        self.window.begin()

    def end(self) -> None:
        self.window.end()
        # the reading after the end covers the request's last interval
        self.window.wait_after_end(self.sampler.interval_s * 2 + 0.5)

    def stop(self) -> None:
        self.sampler.stop()

    def summary(self) -> Any:
        from tui.telemetry.summary import summarize

        return summarize(self.label, list(self.window.samples), self.window.last)


def _hardware(text: str | None, cfg: Any) -> _Hardware | None:
    if not text:
        return None
    from tui.telemetry.sources import SourceError, open_source, parse_source

    try:
        source_spec = parse_source(text)
    except SourceError as e:
        raise CLIError(f"--telemetry: {e}") from None
    t = cfg.telemetry
    source = open_source(source_spec, t.interval_s, t.gpu)
    return _Hardware(source, source_spec.label, t.interval_s)


FAINT, NORMAL = "\033[2m", "\033[22m"  # ANSI: faint on, normal intensity


class ReasoningEcho:
    """Streams an answer to the terminal as it comes: reasoning dimmed (ANSI faint) and
    set apart from the answer by a line; piped (``raw``), the answer alone goes to stdout
    and the reasoning to stderr, so ``run > answer.txt`` keeps the answer. Text shown on
    a terminal passes the terminal-safe filter first."""

    def __init__(self, raw: bool) -> None:
        self.raw = raw
        self.thinking = False

    def write(self, chunk: TextChunk) -> None:
        text = chunk.text if self.raw else terminal_safe(chunk.text)
        if chunk.part == REASONING:
            if self.raw:
                sys.stderr.write(text)
                sys.stderr.flush()
                return
            if not self.thinking:
                sys.stdout.write(FAINT)
                self.thinking = True
            sys.stdout.write(text)
        else:
            if self.thinking and not self.raw:
                sys.stdout.write(NORMAL + "\n")
                self.thinking = False
            sys.stdout.write(text)
        sys.stdout.flush()

    def end(self) -> None:
        """The answer ended: the faint style, if still on, is turned off."""
        if self.thinking and not self.raw:
            sys.stdout.write(NORMAL)
            sys.stdout.flush()
        self.thinking = False


def _to_terminal() -> bool:
    """Whether stdout is a terminal (then model text is filtered: see RUN_EPILOG)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


async def _run(
    cfg: Config,
    spec: Any,
    request: GenerationRequest,
    echo: bool,
    hardware: _Hardware | None = None,
    raw: bool = False,
    outcomes: Outcomes | None = None,
    content_tap: Any = None,
) -> tuple[EngineInfo, float, RequestTimeline, ProcessCpu, Verdict | None, str | None]:
    """Load, stream (echoing the text: raw when ``raw``, else terminal-safe), close;
    infertop's own CPU is measured over the request. The turn runs through the chat core,
    as the TUI's do (tui/chat/core.py); the last two items are the answer's verdict and
    what disturbed it (a build compiling beside it: tui/engines/files/build_state.py),
    or None."""
    from tui.chat.core import ChatCore
    from tui.engines.files.build_state import BuildWatch

    echoed = ReasoningEcho(raw)

    def tap(slot: str, event: StreamEvent) -> None:  # the engine's thread, in order
        if echo and isinstance(event, TextChunk) and event.text:
            echoed.write(event)

    config = dataclasses.replace(cfg, engines={spec.name: spec}, default_engine=spec.name)
    core = ChatCore(
        config,
        lambda event: None,
        initial=spec.name,
        tap=tap,
        outcomes=outcomes,
        source="run",
        disturbance=BuildWatch().disturbance,
    )
    core.content_tap = content_tap
    host = core.host(spec.name)
    try:
        load_ms = await host.load()
        if hardware is not None:
            await asyncio.to_thread(hardware.begin)
        window = ProcessCpuWindow()
        prompt = request.messages[-1].get("content", "")
        await core.run_turn(core.start_turn(prompt, {"A": request}))
        echoed.end()
        info = host.info()
        assert info is not None and core.live["A"] is not None
        own = window.end(engine_inside=info.pid == os.getpid())
        if hardware is not None:
            await asyncio.to_thread(hardware.end)
        live = core.live["A"]
        return info, load_ms, live.timeline, own, core.last_verdict["A"], live.disturbed
    finally:
        await core.close()


def content_tap(exporter: Any) -> Any:
    """The chat core's content tap when the exporter captures content (--capture-content):
    the prompt and the answer to the request's span, as the conventions' message JSON."""
    if exporter is None or not exporter.capture_content:
        return None
    from tui.otel.spans import answer_json, messages_json

    def tap(rid: str, messages: list[dict[str, str]], text: str, finish: str | None) -> None:
        exporter.attach_content(rid, messages_json(messages), answer_json(text, finish))

    return tap


def result_dict(
    info: EngineInfo, load_ms: float, tl: RequestTimeline, m: RequestMetrics
) -> dict[str, Any]:
    """The ``--json`` object: one request, our numbers beside the engine's."""
    return {
        "engine": info.engine,
        "kind": info.kind,
        "build": info.build,
        "model": info.model,
        "quantisation": info.quantisation,
        "text": tl.text,
        "reasoning_text": tl.reasoning_text,
        "prompt_tokens": m.prompt_tokens,
        "output_tokens": m.output_tokens,
        "output_tokens_source": m.output_tokens_source,
        "reasoning_tokens": m.reasoning_tokens,
        "reasoning_tokens_source": m.reasoning_tokens_source,
        "answer_tokens": m.answer_tokens,
        "answer_tokens_estimated": m.answer_tokens_estimated,
        "ttft_ms": m.ttft_ms,
        "ttfo_ms": m.ttfo_ms,
        "thinking_ms": m.thinking_ms,
        "reasoning_tps": m.reasoning_tps,
        "answer_tps": m.answer_tps,
        "ttfr_ms": m.ttfr_ms,
        "itl_ms_p50": m.itl_ms_p50,
        "itl_ms_p90": m.itl_ms_p90,
        "itl_estimated": m.itl_token_estimated,
        "tpot_ms": m.tpot_ms,
        "decode_tps": m.decode_tps,
        "prefill_tps": m.prefill_tps,
        "prefill_tps_source": m.prefill_tps_source,
        "e2e_ms": m.e2e_ms,
        "load_ms": load_ms,
        "finish_reason": m.finish_reason,
        "error": m.error,
        "stamp_source": tl.stamp_source,
        "engine_truth": tl.truth.to_dict() if tl.truth else None,
        "vs_engine": {
            "ttft_minus_engine_prefill_ms": m.ttft_minus_engine_prefill_ms,
            "decode_tps_ours_over_engine": m.decode_tps_vs_engine,
        },
    }


def _f(value: float | None, unit: str, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f} {unit}"


def format_summary(
    info: EngineInfo,
    load_ms: float,
    m: RequestMetrics,
    stamp_source: str | None = None,
    disturbed: str | None = None,
) -> str:
    """A few human lines; estimates say so. What the engine named (model, finish reason,
    stamps) is shown terminal-safe. The build of the engine that ran (the llama.cpp
    kinds: prebuilt or built for this CPU) heads them; what disturbed the request (a
    build compiling beside it) ends them."""
    quant = f" {terminal_label(info.quantisation, 40)}" if info.quantisation else ""
    prefill_note = " (engine)" if m.prefill_tps_source == "engine" else " (estimate)"
    tokens_note = " (estimate: chunk count)" if m.output_tokens_estimated else ""
    build = f" ({terminal_label(info.build)})" if info.build else ""
    lines = [
        f"── {terminal_label(info.engine)} · {terminal_label(info.kind)}{build} · "
        f"{terminal_label(info.model)}{quant} ──",
        f"TTFT {_f(m.ttft_ms, 'ms')}   TTFR {_f(m.ttfr_ms, 'ms')}   e2e {_f(m.e2e_ms, 'ms')}"
        f"   load {_f(load_ms, 'ms')}",
        f"decode {_f(m.decode_tps, 'tok/s')}   prefill {_f(m.prefill_tps, 'tok/s')}"
        f"{prefill_note if m.prefill_tps is not None else ''}",
        f"ITL p50 {_f(m.itl_ms_p50, 'ms', 2)}   p90 {_f(m.itl_ms_p90, 'ms', 2)}"
        f"   TPOT {_f(m.tpot_ms, 'ms', 2)}",
        f"tokens: prompt {m.prompt_tokens if m.prompt_tokens is not None else 'unknown'}, "
        f"output {m.output_tokens}{tokens_note}   finish: {terminal_label(m.finish_reason, 80)}",
    ]
    if m.reasoning_tokens is not None or m.thinking_ms is not None:
        estimated = m.reasoning_tokens_source == "chunk-count-estimate"
        r_note = " (estimate: chunk count)" if estimated else ""
        lines.append(
            f"TTFO {_f(m.ttfo_ms, 'ms')}   thinking {_f(m.thinking_ms, 'ms')}   "
            f"reasoning {m.reasoning_tokens if m.reasoning_tokens is not None else 'n/a'} "
            f"tokens{r_note} at {_f(m.reasoning_tps, 'tok/s')}   "
            f"answer {m.answer_tokens if m.answer_tokens is not None else 'n/a'}"
            f"{' (estimate)' if m.answer_tokens_estimated else ''} at {_f(m.answer_tps, 'tok/s')}"
        )
    if m.engine_prefill_ms is not None or m.engine_decode_tps is not None:
        diff = m.ttft_minus_engine_prefill_ms
        ratio = m.decode_tps_vs_engine
        lines.append(
            f"engine says: prefill {_f(m.engine_prefill_ms, 'ms')}, "
            f"decode {_f(m.engine_decode_tps, 'tok/s')}   "
            f"TTFT − engine prefill {_f(diff, 'ms')}   "
            f"our decode ÷ engine {'n/a' if ratio is None else f'{ratio:.3f}'}"
        )
    if stamp_source:
        lines.append(f"stamps: {terminal_label(stamp_source)}")
    if disturbed:
        lines.append(f"disturbed: {terminal_label(disturbed)} while this request ran")
    return "\n".join(lines)
