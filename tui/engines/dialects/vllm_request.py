"""vLLM's own account of one request, from its response: ``metrics`` (vLLM 0.32+).

A vLLM server started with ``--enable-per-request-metrics`` puts a ``metrics`` object in
each answer (streamed: on the final chunk that carries ``usage``, so the client must ask
for usage): ``queue_time_ms`` (queued → scheduled), ``time_to_first_token_ms``
(scheduled → first token: the prefill, with any chunked-prefill pauses),
``generation_time_ms`` (first → last token), ``mean_itl_ms``, ``tokens_per_second``.
With speculative decoding on and ``--per-request-spec-decode-metrics summary`` it also
carries ``speculative_decoding``: ``num_draft_tokens`` (D, drafted),
``num_accepted_draft_tokens`` (A), ``num_spec_steps`` (K, drafts verified),
``mean_acceptance_length`` (1 + A / K), ``draft_acceptance_rate`` (A / D) and
``acceptance_histogram`` (index j: steps that accepted exactly j draft tokens). The
names llama-server's timings use (``draft_n``, ``draft_n_accepted``) carry D and A on,
with ``spec_drafts`` = K.

These are per request at any concurrency: unlike the /metrics account
(tui/engines/http/vllm.py), nothing here needs the request to have run alone.
"""

from __future__ import annotations

from typing import Any

from tui.core.events import EngineTruth
from tui.core.spec import count

SOURCE = "vLLM per-request metrics"


def _ms(d: dict[str, Any], key: str) -> float | None:
    return count(d.get(key))


def spec_raw(spec: object) -> dict[str, float]:
    """draft_n, draft_n_accepted and spec_drafts from ``speculative_decoding`` ({} when
    it is missing or its counts are not counts, or say more accepted than drafted)."""
    if not isinstance(spec, dict):
        return {}
    drafted = count(spec.get("num_draft_tokens"))
    accepted = count(spec.get("num_accepted_draft_tokens"))
    steps = count(spec.get("num_spec_steps"))
    if drafted is None or accepted is None or steps is None or accepted > drafted:
        return {}
    return {"draft_n": drafted, "draft_n_accepted": accepted, "spec_drafts": steps}


def truth_from_request_metrics(
    metrics: object, usage: dict[str, Any] | None, cached: int | None
) -> EngineTruth | None:
    """EngineTruth from a response's ``metrics`` (None when it says nothing usable);
    ``usage`` gives the token counts, ``cached`` the cached prompt tokens where the
    server reports them (``--enable-prompt-tokens-details``)."""
    if not isinstance(metrics, dict):
        return None
    raw: dict[str, float] = {}
    queue = _ms(metrics, "queue_time_ms")
    if queue is not None:
        raw["queue_ms"] = queue
    itl = _ms(metrics, "mean_itl_ms")
    if itl is not None:
        raw["mean_itl_ms"] = itl
    raw.update(spec_raw(metrics.get("speculative_decoding")))
    prefill, decode = _ms(metrics, "time_to_first_token_ms"), _ms(metrics, "generation_time_ms")
    if not raw and prefill is None and decode is None:
        return None
    u = usage or {}
    prompt = count(u.get("prompt_tokens"))
    out = count(u.get("completion_tokens"))
    prompt_n = None if prompt is None else int(prompt)
    out_n = None if out is None else int(out)
    return EngineTruth(
        prompt_tokens=prompt_n,
        prompt_eval_tokens=None
        if prompt_n is None or cached is None
        else max(0, prompt_n - cached),
        prompt_ms=prefill,
        output_tokens=out_n,
        decode_tokens=None if out_n is None else max(out_n - 1, 0),
        decode_ms=decode,
        cached_tokens=cached,
        source=SOURCE,
        raw=raw,
    )
