"""Number formatting shared by the widgets (one place for units and labels)."""

from __future__ import annotations

from tui.core.metrics import RequestMetrics
from tui.core.safe_text import terminal_label
from tui.core.verdict import Verdict


def ms(v: float | None) -> str:
    if v is None:
        return "–"
    if v >= 10_000:
        return f"{v / 1000:.1f} s"
    if v >= 100:
        return f"{v:.0f} ms"
    return f"{v:.1f} ms"


def duration(v: float) -> str:
    """A span of a second or more in seconds ("3.2 s"), a shorter one as :func:`ms`."""
    return f"{v / 1000:.1f} s" if v >= 1000 else ms(v)


def tps(v: float | None) -> str:
    return "–" if v is None else (f"{v:.0f}" if v >= 1000 else f"{v:.1f}")


def gib(n: int | None) -> str:
    return "–" if n is None else f"{n / 2**30:.1f} GiB"


def mib(n: int | None) -> str:
    return "–" if n is None else f"{n / 2**20:.0f} MiB"


def ratio(a: float | None, b: float | None) -> str:
    """b / a as 'x.xx×' (the A/B column), '–' when either is missing."""
    if a is None or b is None or a == 0:
        return "–"
    return f"{b / a:.2f}×"


def had_reasoning(m: RequestMetrics) -> bool:
    """The model thought: it streamed reasoning, or its engine counted reasoning tokens
    (a model that hides its reasoning)."""
    return m.thinking_ms is not None or bool(m.reasoning_tokens)


def summary_line(m: RequestMetrics) -> str:
    """The one-line summary under an answer. Estimates carry '(est.)'. TTFO (the first
    answer token or tool call, tui/core/metrics.py) follows TTFT where the model thought
    first; "N tok (R reasoning)" says how many of the tokens were its reasoning."""
    parts = [f"TTFT {ms(m.ttft_ms)}"]
    if had_reasoning(m) and m.ttfo_ms != m.ttft_ms:
        parts.append(f"TTFO {ms(m.ttfo_ms)}")
    n = m.output_tokens
    if n is not None:
        tok = f"{n} tok"
        if m.reasoning_tokens:
            est = "~" if m.reasoning_tokens_source == "chunk-count-estimate" else ""
            tok += f" ({est}{m.reasoning_tokens} reasoning)"
        parts.append(tok + (" (est.)" if m.output_tokens_estimated else ""))
    if m.decode_tps is not None:
        parts.append(f"{tps(m.decode_tps)} tok/s")
    if m.itl_ms_p50 is not None:
        est = " (est.)" if m.itl_token_estimated else ""
        parts.append(f"ITL p50 {ms(m.itl_ms_p50)} p90 {ms(m.itl_ms_p90)}{est}")
    if m.prefill_tps is not None:
        label = "engine" if m.prefill_tps_source == "engine" else "est."
        parts.append(f"prefill {tps(m.prefill_tps)} tok/s ({label})")
    parts.append(f"e2e {ms(m.e2e_ms)}")
    if m.finish_reason == "cancelled":
        parts.append("CANCELLED")
    elif m.error:
        parts.append(f"ERROR: {terminal_label(m.error, 2000)}")
    elif m.finish_reason:
        parts.append(terminal_label(m.finish_reason, 80))
    return " · ".join(parts)


def why_text(verdict: Verdict | None) -> str:
    """The verdict after an answer's summary (" · why: queued 1.8 s behind 1 busy slot
    (-np 1)"); nothing for none, and nothing where the summary already says it ended
    early (failed, cancelled)."""
    if verdict is None or verdict.kind in ("failed", "cancelled"):
        return ""
    return " · why: " + terminal_label(verdict.text, 300)
