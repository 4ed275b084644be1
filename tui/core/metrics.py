"""Every request metric, defined once. The README quotes these definitions.

All times come from :class:`~tui.core.timeline.RequestTimeline`, stamped at the source.
Let t0 = request sent, t_first = first chunk with non-empty text, t_last = last chunk
with non-empty text, t_end = end of the stream, N = output tokens (engine-counted).

- TTFT = t_first − t0. A role-only or empty chunk is not the first token.
- TTFR = first response byte of any kind − t0.
- ITL (per chunk) = gaps between successive content chunks.
- ITL (per token) = each gap spread over the tokens its chunk carries: a chunk with k
  tokens after a gap g contributes k values of g/k. When the engine does not give per-chunk
  counts but gives N, every gap is taken to carry (N−1)/(C−1) tokens (C content chunks)
  and the view is marked as an estimate (then the mean of the values × (N−1) is the span).
- A chunk the engine says carries 0 tokens (text with no token of its own: llama.cpp's
  final UTF-8 flush, a server's trailing text) adds text, never a gap: ITL, decode time and
  t_first/t_last for decode are taken over the chunks that carry tokens (a count ≥ 1, or
  no count at all). Its text still counts for TTFT if it is the first text.
- TPOT = (e2e − TTFT) / (N − 1). TTFT is never inside ITL or TPOT.
- Decode tok/s = (N − 1) / (t_last − t_first).
- Prefill tok/s = prompt tokens / prefill time, from the engine where it reports prefill
  time (source "engine"), else prompt tokens / TTFT (source "estimate").
- E2E = t_end − t0.
- Output tokens N: the engine's usage count; else the sum of engine-given per-chunk
  counts; else the number of content chunks, marked as an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from tui.core.stats import percentile
from tui.core.timeline import RequestTimeline

NS_PER_MS = 1_000_000


@dataclass
class RequestMetrics:
    """The metrics of one request. ``None`` means "not measurable for this request"."""

    ttft_ms: float | None
    ttfr_ms: float | None
    e2e_ms: float | None
    itl_chunk_ms: list[float] = field(default_factory=list)
    itl_token_ms: list[float] = field(default_factory=list)
    itl_token_estimated: bool = False
    tpot_ms: float | None = None
    decode_tps: float | None = None
    prefill_tps: float | None = None
    prefill_tps_source: str | None = None  # "engine" | "estimate" | None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_source: str = "chunk-count-estimate"  # usage | engine-chunks | ...
    content_chunks: int = 0
    prefill_ms: float | None = None  # engine prefill time, else TTFT (see source)
    decode_ms: float | None = None  # t_last − t_first
    engine_prefill_ms: float | None = None
    engine_decode_tps: float | None = None
    ttft_minus_engine_prefill_ms: float | None = None
    decode_tps_vs_engine: float | None = None
    finish_reason: str | None = None
    error: str | None = None

    @property
    def output_tokens_estimated(self) -> bool:
        return self.output_tokens_source == "chunk-count-estimate"

    @property
    def itl_ms_p50(self) -> float | None:
        return percentile(self.itl_token_ms, 50) if self.itl_token_ms else None

    @property
    def itl_ms_p90(self) -> float | None:
        return percentile(self.itl_token_ms, 90) if self.itl_token_ms else None

    def to_dict(self, with_lists: bool = True) -> dict[str, Any]:
        # shallow: the ITL lists are shared, not deep-copied (asdict's copy was most of
        # the cost of writing a report)
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if not with_lists:
            d.pop("itl_chunk_ms")
            d.pop("itl_token_ms")
        d["itl_ms_p50"] = self.itl_ms_p50
        d["itl_ms_p90"] = self.itl_ms_p90
        d["output_tokens_estimated"] = self.output_tokens_estimated
        return d


def _ms(ns: int) -> float:
    return ns / NS_PER_MS


def output_token_count(tl: RequestTimeline) -> tuple[int | None, str]:
    """N and where it came from (see the module docstring)."""
    if tl.usage_output_tokens is not None:
        return tl.usage_output_tokens, "usage"
    _, tokens = tl.content_columns()
    if tokens and all(k is not None for k in tokens):
        return sum(k or 0 for k in tokens), "engine-chunks"
    if tl.truth is not None and tl.truth.output_tokens is not None:
        return tl.truth.output_tokens, "usage"
    return len(tokens), "chunk-count-estimate"


def token_columns(
    stamps: list[int], tokens: list[int | None]
) -> tuple[list[int], list[int | None]]:
    """The content chunks that carry tokens: a count of 0 means text without a token."""
    if 0 not in tokens:
        return stamps, tokens
    keep = [i for i, k in enumerate(tokens) if k != 0]
    return [stamps[i] for i in keep], [tokens[i] for i in keep]


def compute_metrics(tl: RequestTimeline) -> RequestMetrics:
    """Compute every metric of one request from its timeline, as the module defines."""
    t0 = tl.t_sent_ns
    text_stamps, text_tokens = tl.content_columns()  # of the chunks that carry text
    stamps, tokens = token_columns(text_stamps, text_tokens)
    n_out, n_source = output_token_count(tl)

    ttft_ns = text_stamps[0] - t0 if (t0 is not None and text_stamps) else None
    ttfr_ns = tl.t_first_byte_ns - t0 if (t0 is not None and tl.t_first_byte_ns) else None
    t_end = tl.t_end_ns if tl.t_end_ns is not None else (tl.chunk_ns[-1] if tl.chunk_ns else None)
    e2e_ns = t_end - t0 if (t0 is not None and t_end is not None) else None

    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    itl_chunk = [g / NS_PER_MS for g in gaps]
    itl_token: list[float] = []
    estimated = False
    if gaps:
        if all(k is not None for k in tokens[1:]):
            for g, k in zip(gaps, tokens[1:]):
                k = k or 0
                itl_token.extend([_ms(g) / k] * k)
        else:
            estimated = True
            per_gap = (n_out - 1) / len(gaps) if n_out and n_out > 1 else 1.0
            itl_token = [g / NS_PER_MS / per_gap for g in gaps]  # _ms(g) / per_gap

    tpot = decode_tps = decode_ms = None
    if ttft_ns is not None and e2e_ns is not None and n_out is not None and n_out > 1:
        tpot = _ms(e2e_ns - ttft_ns) / (n_out - 1)
    if len(stamps) >= 1 and n_out is not None and n_out > 1:
        span_ns = stamps[-1] - stamps[0]
        decode_ms = _ms(span_ns)
        if span_ns > 0:
            decode_tps = (n_out - 1) / (span_ns / 1e9)

    m = RequestMetrics(
        ttft_ms=None if ttft_ns is None else _ms(ttft_ns),
        ttfr_ms=None if ttfr_ns is None else _ms(ttfr_ns),
        e2e_ms=None if e2e_ns is None else _ms(e2e_ns),
        itl_chunk_ms=itl_chunk,
        itl_token_ms=itl_token,
        itl_token_estimated=estimated,
        tpot_ms=tpot,
        decode_tps=decode_tps,
        decode_ms=decode_ms,
        prompt_tokens=tl.prompt_tokens,
        output_tokens=n_out,
        output_tokens_source=n_source,
        content_chunks=len(text_stamps),
        finish_reason=tl.finish_reason,
        error=tl.error,
    )
    _add_prefill(m, tl)
    _add_engine_comparison(m, tl)
    return m


def _add_prefill(m: RequestMetrics, tl: RequestTimeline) -> None:
    truth = tl.truth
    if truth is not None and truth.prefill_tps is not None:
        m.prefill_tps = truth.prefill_tps
        m.prefill_tps_source = "engine"
        m.prefill_ms = truth.prompt_ms
    elif m.prompt_tokens and m.ttft_ms:
        m.prefill_tps = m.prompt_tokens / (m.ttft_ms / 1000.0)
        m.prefill_tps_source = "estimate"
        m.prefill_ms = m.ttft_ms


def _add_engine_comparison(m: RequestMetrics, tl: RequestTimeline) -> None:
    """Client measurement beside engine truth: the difference is network + HTTP + queue."""
    truth = tl.truth
    if truth is None:
        return
    m.engine_prefill_ms = truth.prompt_ms
    m.engine_decode_tps = truth.decode_tps
    if truth.prompt_ms is not None and m.ttft_ms is not None:
        m.ttft_minus_engine_prefill_ms = m.ttft_ms - truth.prompt_ms
    if truth.decode_tps and m.decode_tps is not None:
        m.decode_tps_vs_engine = m.decode_tps / truth.decode_tps
