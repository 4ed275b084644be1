"""Every request metric, defined once. The README quotes these definitions.

All times come from :class:`~tui.core.timeline.RequestTimeline`, stamped at the source.
Let t0 = request sent, t_first = first chunk with non-empty text, t_last = last chunk
with non-empty text, t_end = end of the stream, N = output tokens (engine-counted).
A chunk's text is the answer, reasoning (a model's thinking, streamed apart from its
answer) or a tool call (an answer too); "chunk" below means any of them unless it says.

- TTFT = t_first − t0: the first token of any kind, reasoning included (what vLLM's
  ``bench serve``, AIPerf and GuideLLM call TTFT). A role-only or empty chunk is not the
  first token.
- TTFO (time to first output token) = t_first_answer − t0, t_first_answer = the first
  chunk of answer text or of a tool call. Without reasoning, TTFO = TTFT.
- Thinking time = t_first_answer − t_first_reasoning; when no answer came after the
  reasoning, t_last_reasoning − t_first_reasoning; None when no reasoning was streamed.
- Reasoning tokens R: the engine's count (usage ``reasoning_tokens``); else the sum of
  engine-given per-chunk counts of the reasoning chunks; else the number of reasoning
  chunks, marked as an estimate. Answer tokens A = N − R (an estimate when R or N is).
- Reasoning tok/s = (R − 1) / (t_last_reasoning − t_first_reasoning); answer tok/s =
  (A − 1) / (t_last_answer − t_first_answer), each over its own chunks that carry
  tokens.
- TTFR = first response byte of any kind − t0.
- ITL (per chunk) = gaps between successive content chunks.
- ITL (per token) = each gap spread over the tokens its chunk carries: a chunk with k
  tokens after a gap g contributes k values of g/k. They are kept as one value g/k of
  weight k per gap (``itl_token_ms`` and ``itl_token_weights``), never as k copies: a
  count of millions costs one number, and the percentiles (p50, p90, a bench's pooled
  ones) are those of the k copies exactly (:func:`tui.core.stats.weighted_percentile`).
  When the engine does not give per-chunk counts but gives N, every gap is taken to carry
  (N−1)/(C−1) tokens (C content chunks): one value g·(C−1)/(N−1) per gap, each of weight
  1, and the view is marked as an estimate (then the mean of the values × (N−1) is the
  span).
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
from typing import Any, Final, Literal, get_args

from tui.core.events import EndReason
from tui.core.stats import weighted_percentile, weighted_percentiles
from tui.core.timeline import RequestTimeline

NS_PER_MS = 1_000_000
# Where a token count came from: the engine's usage total, the sum of its per-chunk
# counts, or the number of chunks (an estimate)
CountSource = Literal["usage", "engine-chunks", "chunk-count-estimate"]
COUNT_SOURCES: Final[tuple[CountSource, ...]] = get_args(CountSource)
# Where prefill tok/s came from: the engine's prefill time, or TTFT (an estimate)
PrefillSource = Literal["engine", "estimate"]
PREFILL_SOURCES: Final[tuple[PrefillSource, ...]] = get_args(PrefillSource)


@dataclass
class RequestMetrics:
    """The metrics of one request. ``None`` means "not measurable for this request"."""

    ttft_ms: float | None
    ttfr_ms: float | None
    e2e_ms: float | None
    itl_chunk_ms: list[float] = field(default_factory=list)
    # per-token ITL: one value per gap (gap / k) standing for the gap's k tokens (its
    # weight; the module docstring): the per-token percentiles are weighted ones
    itl_token_ms: list[float] = field(default_factory=list)
    itl_token_weights: list[int] = field(default_factory=list)
    itl_token_estimated: bool = False
    tpot_ms: float | None = None
    decode_tps: float | None = None
    prefill_tps: float | None = None
    prefill_tps_source: PrefillSource | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_source: CountSource = "chunk-count-estimate"
    content_chunks: int = 0
    prefill_ms: float | None = None  # engine prefill time, else TTFT (see source)
    decode_ms: float | None = None  # t_last − t_first
    engine_prefill_ms: float | None = None
    engine_decode_tps: float | None = None
    ttft_minus_engine_prefill_ms: float | None = None
    decode_tps_vs_engine: float | None = None
    finish_reason: EndReason | None = None
    error: str | None = None
    ttfo_ms: float | None = None
    thinking_ms: float | None = None
    reasoning_tokens: int | None = None
    reasoning_tokens_source: CountSource | None = None
    answer_tokens: int | None = None
    answer_tokens_estimated: bool = False
    reasoning_tps: float | None = None
    answer_tps: float | None = None

    def __post_init__(self) -> None:
        if self.itl_token_ms and not self.itl_token_weights:  # made by hand: a token each
            self.itl_token_weights = [1] * len(self.itl_token_ms)

    @property
    def output_tokens_estimated(self) -> bool:
        return self.output_tokens_source == "chunk-count-estimate"

    @property
    def itl_ms_p50(self) -> float | None:
        """Per-token ITL p50 (each gap's value counted once per token it stands for)."""
        return self.itl_token_percentile(50)

    @property
    def itl_ms_p90(self) -> float | None:
        return self.itl_token_percentile(90)

    def itl_token_percentile(self, q: float) -> float | None:
        if not self.itl_token_ms:
            return None
        return weighted_percentile(self.itl_token_ms, self.itl_token_weights, q)

    def itl_token_p50_p90(self) -> tuple[float | None, float | None]:
        """(:attr:`itl_ms_p50`, :attr:`itl_ms_p90`) from one sort of the values."""
        if not self.itl_token_ms:
            return None, None
        p50, p90 = weighted_percentiles(self.itl_token_ms, self.itl_token_weights, (50, 90))
        return p50, p90

    def itl_token_recent(self, limit: int) -> list[float]:
        """The last per-token ITL values, each gap's repeated for its tokens, at most
        ``limit`` of them (a sparkline's; as :class:`tui.core.live.LiveCounts` keeps)."""
        out: list[float] = []
        for v, w in zip(reversed(self.itl_token_ms), reversed(self.itl_token_weights)):
            out.extend([v] * min(w, limit - len(out)))
            if len(out) >= limit:
                break
        out.reverse()
        return out

    def to_dict(self, with_lists: bool = True) -> dict[str, Any]:
        # shallow: the ITL lists are shared, not deep-copied (asdict's copy was most of
        # the cost of writing a report)
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if not with_lists:
            d.pop("itl_chunk_ms")
            d.pop("itl_token_ms")
            d.pop("itl_token_weights")
        d["itl_ms_p50"], d["itl_ms_p90"] = self.itl_token_p50_p90()
        d["output_tokens_estimated"] = self.output_tokens_estimated
        return d


def itl_weights_in(d: dict[str, Any]) -> list[int]:
    """The weights of the ``itl_token_ms`` of a metrics dict (:meth:`RequestMetrics.to_dict`,
    checked by its reader): each value one token in a report written before them."""
    weights = d.get("itl_token_weights")
    if weights is not None:
        return list(weights)
    return [1] * len(d.get("itl_token_ms") or [])


def _ms(ns: int) -> float:
    return ns / NS_PER_MS


def output_token_count(tl: RequestTimeline) -> tuple[int | None, CountSource]:
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
    weights: list[int] = []
    estimated = False
    if gaps:
        counts = tokens[1:]
        if all(k is not None for k in counts):
            weights = [k or 0 for k in counts]  # each ≥ 1: token_columns took out the 0s
            itl_token = [_ms(g) / k for g, k in zip(gaps, weights)]
        else:
            estimated = True
            per_gap = (n_out - 1) / len(gaps) if n_out and n_out > 1 else 1.0
            itl_token = [g / NS_PER_MS / per_gap for g in gaps]  # _ms(g) / per_gap
            weights = [1] * len(gaps)

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
        itl_token_weights=weights,
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
    if tl.chunk_part or tl.usage_reasoning_tokens:
        _add_reasoning(m, tl)
    else:
        m.ttfo_ms = m.ttft_ms
        m.answer_tokens = n_out
        m.answer_tokens_estimated = m.output_tokens_estimated
        m.answer_tps = m.decode_tps
    return m


def _rate(stamps: list[int], n: int | None) -> float | None:
    """(n − 1) / (last − first) in tokens per second, over ``stamps``."""
    if n is None or n < 2 or len(stamps) < 2 or stamps[-1] <= stamps[0]:
        return None
    return (n - 1) / ((stamps[-1] - stamps[0]) / 1e9)


def reasoning_token_count(tl: RequestTimeline) -> tuple[int | None, CountSource | None]:
    """R and where it came from (see the module docstring); (None, None) when the
    request streamed no reasoning and the engine counted none."""
    if tl.usage_reasoning_tokens is not None:
        return tl.usage_reasoning_tokens, "usage"
    _, tokens = tl.part_columns(reasoning=True)
    if not tokens:
        return None, None
    if all(k is not None for k in tokens):
        return sum(k or 0 for k in tokens), "engine-chunks"
    return len(tokens), "chunk-count-estimate"


def _add_reasoning(m: RequestMetrics, tl: RequestTimeline) -> None:
    """TTFO, thinking time and the reasoning/answer split (the module docstring)."""
    t0 = tl.t_sent_ns
    r_stamps, r_tokens = tl.part_columns(reasoning=True)
    a_stamps, a_tokens = tl.part_columns(reasoning=False)
    if t0 is not None and a_stamps:
        m.ttfo_ms = _ms(a_stamps[0] - t0)
    if r_stamps:
        end = a_stamps[0] if a_stamps else r_stamps[-1]
        m.thinking_ms = _ms(end - r_stamps[0])
    n_r, r_source = reasoning_token_count(tl)
    m.reasoning_tokens, m.reasoning_tokens_source = n_r, r_source
    n_out = m.output_tokens
    if n_out is not None:
        m.answer_tokens = max(n_out - (n_r or 0), 0)
        m.answer_tokens_estimated = m.output_tokens_estimated or (
            r_source not in (None, "usage", "engine-chunks")
        )
    r_stamps, _ = token_columns(r_stamps, r_tokens)
    a_stamps, _ = token_columns(a_stamps, a_tokens)
    m.reasoning_tps = _rate(r_stamps, n_r)
    m.answer_tps = _rate(a_stamps, m.answer_tokens)


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
