"""Properties of compute_metrics over arbitrary timelines (hypothesis).

For any stream an engine could produce — stamps in order, chunks with or without text,
with per-chunk token counts (0 included) or none, usage or not, a finish or a failure —
the metrics never raise and keep their definitions' relations:
TTFT ≤ e2e; every ITL ≥ 0; per-token ITLs sum to t_last − t_first (exactly when the
engine gives per-chunk counts; as mean × (N − 1) when the view is an estimate);
decode tok/s × decode time = N − 1; and an estimate says it is one.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core.events import Failed, Finished, RequestSent, TextChunk, Usage
from tui.core.metrics import compute_metrics, token_columns
from tui.core.stats import percentile
from tui.core.timeline import RequestTimeline

MS = 1_000_000


@st.composite
def timelines(draw: st.DrawFn) -> RequestTimeline:
    t = draw(st.integers(0, 10**12))
    tl = RequestTimeline()
    tl.add(RequestSent(t))
    counted = draw(st.booleans())  # does the engine give per-chunk counts?
    n_chunks = draw(st.integers(0, 40))
    for _ in range(n_chunks):
        t += draw(st.integers(0, 500 * MS))
        text = draw(st.sampled_from(["", "a", "bc", " ", "\ufffd", "word "]))
        tokens = draw(st.integers(0, 4)) if counted else None
        if counted and draw(st.integers(0, 9)) == 0:
            tokens = None  # an engine that counts some chunks only
        tl.add(TextChunk(t, text, tokens))
    if draw(st.booleans()):
        tl.add(
            Usage(t, draw(st.none() | st.integers(0, 500)), draw(st.none() | st.integers(0, 200)))
        )
    t += draw(st.integers(0, 50 * MS))
    if draw(st.booleans()):
        tl.add(Finished(t, draw(st.sampled_from(["stop", "length", "cancelled"]))))
    else:
        tl.add(Failed(t, "engine died", "engine"))
    return tl


@settings(max_examples=2000, deadline=None)
@given(timelines())
def test_metric_relations_hold_for_any_timeline(tl: RequestTimeline) -> None:
    m = compute_metrics(tl)  # never raises
    if m.ttft_ms is not None:
        assert m.e2e_ms is not None and m.ttft_ms <= m.e2e_ms
        assert m.ttft_ms >= 0
    if m.ttfr_ms is not None and m.ttft_ms is not None:
        assert m.ttfr_ms <= m.ttft_ms
    assert all(x >= 0 for x in m.itl_chunk_ms)
    assert all(x >= 0 for x in m.itl_token_ms)
    stamps, tokens = token_columns(*tl.content_columns())
    span_ms = (stamps[-1] - stamps[0]) / MS if stamps else 0.0
    n = m.output_tokens
    assert len(m.itl_token_weights) == len(m.itl_token_ms)
    assert all(type(w) is int and w >= 1 for w in m.itl_token_weights)
    if m.itl_token_ms and not m.itl_token_estimated:
        spread = sum(v * w for v, w in zip(m.itl_token_ms, m.itl_token_weights))
        assert math.isclose(spread, span_ms, rel_tol=1e-9, abs_tol=1e-6)
        # the weighted percentiles are those of the values expanded, one per token
        expanded = [v for v, w in zip(m.itl_token_ms, m.itl_token_weights) for _ in range(w)]
        assert m.itl_ms_p50 == percentile(expanded, 50)
        assert m.itl_ms_p90 == percentile(expanded, 90)
    if m.itl_token_ms and m.itl_token_estimated and n is not None and n > 1:
        mean = sum(m.itl_token_ms) / len(m.itl_token_ms)
        assert math.isclose(mean * (n - 1), span_ms, rel_tol=1e-9, abs_tol=1e-6)
    if m.decode_tps is not None:
        assert n is not None and n > 1 and m.decode_ms is not None and m.decode_ms > 0
        assert math.isclose(m.decode_tps * m.decode_ms / 1000, n - 1, rel_tol=1e-9)
    if m.tpot_ms is not None:
        assert m.tpot_ms >= 0
    # estimates say so
    chunk_counts_known = all(k is not None for k in tl.content_columns()[1])
    if tl.usage_output_tokens is None and not chunk_counts_known:
        assert m.output_tokens_estimated
    if m.itl_token_estimated:
        assert any(k is None for k in tokens[1:])
    if m.prefill_tps is not None:
        assert m.prefill_tps_source in ("engine", "estimate")
