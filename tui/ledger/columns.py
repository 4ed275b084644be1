"""One ledger row per finished request: the columns of ``requests``, from a
:class:`~tui.core.outcome.RequestOutcome`. Numbers and names only — no prompt, answer,
reasoning text, tool arguments, header or key is in an outcome, so none can be here.

Times are seconds: ``t0`` the wall clock (epoch) when the request was sent, ``e2e_s``,
``ttft_s``, ``ttfo_s`` (None for an answer not streamed: its first token is its end),
``itl_p50_s`` / ``itl_p90_s`` (per-token ITL); ``decode_tps`` tokens per second — each
by tui/core/metrics.py's definitions. Token counts and where each came from:
``prompt_tokens`` and ``cached_tokens`` are the engine's own counts (None where it gave
none: never estimated); ``output_tokens`` and ``reasoning_tokens`` are the engine's, or
counted from chunks where it gave none, and then ``output_est`` / ``reasoning_est`` is 1
(an estimate). ``truth_*`` is the engine's own account where it gave one (its source, its
prefill time, the prompt tokens it evaluated, its output count and decode rate).
``verdict`` is why the request took its time: its verdict's kind (tui/core/verdict.py:
queued, prefill-bound, cache-hit, ...) where its place gave one (the bench's at the end
of the request's level: tui/bench/run/published.py), else None.

Names (route, api, upstream, model, the client's parts, error kind, truth source) are
stored once in ``texts`` and referred to by id: a name repeated over a million rows costs
its text once. ``client`` is :attr:`ClientIdentity.label` — the name a table groups by.
"""

from __future__ import annotations

import math
from typing import Any, Final

from tui.core.outcome import RequestOutcome

# (column, is a name kept in ``texts``), in insert order
COLUMNS: Final[tuple[tuple[str, bool], ...]] = (
    ("rid", False),
    ("source", False),
    ("state", False),
    ("error_kind", True),
    ("route", True),
    ("api", True),
    ("upstream", True),
    ("model", True),
    ("client", True),
    ("c_name", True),
    ("c_user", True),
    ("c_key", True),
    ("c_program", True),
    ("c_process", True),
    ("c_address", True),
    ("t0", False),
    ("e2e_s", False),
    ("ttft_s", False),
    ("ttfo_s", False),
    ("streamed", False),
    ("decode_tps", False),
    ("itl_p50_s", False),
    ("itl_p90_s", False),
    ("prompt_tokens", False),
    ("cached_tokens", False),
    ("output_tokens", False),
    ("output_est", False),
    ("reasoning_tokens", False),
    ("reasoning_est", False),
    ("truth_source", True),
    ("truth_prompt_ms", False),
    ("truth_prompt_eval", False),
    ("truth_output", False),
    ("truth_decode_tps", False),
    ("verdict", False),
)
NAMES: Final = tuple(name for name, _text in COLUMNS)
TEXT_AT: Final = tuple(i for i, (_n, text) in enumerate(COLUMNS) if text)
INSERT: Final = f"INSERT INTO requests ({', '.join(NAMES)}) VALUES ({', '.join('?' * len(NAMES))})"
RID_CHARS: Final = 64


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _finite(row: list[Any]) -> list[Any]:
    """NaN and infinities (a clock that stepped, a zero span) are no measurement: None."""
    return [None if type(v) is float and not math.isfinite(v) else v for v in row]


def row_of(o: RequestOutcome) -> list[Any]:
    """The row of one outcome (names as text: the writer turns them into ids)."""
    m, c, truth = o.metrics, o.client, o.truth
    first_token = o.streamed is not False
    reasoning_est = None
    if m.reasoning_tokens is not None:
        reasoning_est = int(m.reasoning_tokens_source == "chunk-count-estimate")
    return _finite(
        [
            o.id[:RID_CHARS],
            o.source,
            o.state,
            o.error_kind,
            o.route,
            o.api,
            o.upstream,
            o.model,
            c.label,
            c.name,
            c.user,
            c.key_fingerprint,
            c.program,
            c.process,
            c.address,
            o.t0_wall,
            o.e2e_s,
            _s(m.ttft_ms) if first_token else None,
            _s(m.ttfo_ms) if first_token else None,
            None if o.streamed is None else int(o.streamed),
            m.decode_tps,
            _s(m.itl_ms_p50),
            _s(m.itl_ms_p90),
            m.prompt_tokens,
            None if truth is None else truth.cached_tokens,
            m.output_tokens,
            None if m.output_tokens is None else int(m.output_tokens_estimated),
            m.reasoning_tokens,
            reasoning_est,
            None if truth is None else (truth.source or None),
            None if truth is None else truth.prompt_ms,
            None if truth is None else truth.prompt_eval_tokens,
            None if truth is None else truth.output_tokens,
            None if truth is None else truth.decode_tps,
            None if o.verdict is None else o.verdict.kind,
        ]
    )
