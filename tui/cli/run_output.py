"""What ``infertop run`` writes: the answer echoed as it streams (reasoning dimmed, or
to stderr when piped), the human summary of its metrics, and the ``--json`` object."""

from __future__ import annotations

import sys
from typing import Any

from tui.core.events import REASONING, TextChunk
from tui.core.metrics import RequestMetrics
from tui.core.safe_text import terminal_label, terminal_safe
from tui.core.timeline import RequestTimeline
from tui.engines.base import EngineInfo

ENERGY_NONE = "energy: unknown (the source reported no energy counter and no power)"
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


def to_terminal() -> bool:
    """Whether stdout is a terminal (then model text is filtered: see RUN_EPILOG in run.py)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


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
        "response_model": tl.response_model,  # the model the server's answer named
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
    answered: str | None = None,
) -> str:
    """A few human lines; estimates say so. What the engine named (model, finish reason,
    stamps) is shown terminal-safe. The build of the engine that ran (the llama.cpp
    kinds: prebuilt or built for this CPU) heads them, and ``answered``, the model the
    server's answer named, where it is not the one asked for; what disturbed the request
    (a build compiling beside it) ends them."""
    quant = f" {terminal_label(info.quantisation, 40)}" if info.quantisation else ""
    prefill_note = " (engine)" if m.prefill_tps_source == "engine" else " (estimate)"
    tokens_note = " (estimate: chunk count)" if m.output_tokens_estimated else ""
    build = f" ({terminal_label(info.build)})" if info.build else ""
    by = (
        f" · answered by {terminal_label(answered, 80)}"
        if answered not in (None, info.model)
        else ""
    )
    lines = [
        f"── {terminal_label(info.engine)} · {terminal_label(info.kind)}{build} · "
        f"{terminal_label(info.model)}{quant}{by} ──",
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
