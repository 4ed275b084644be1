"""SLO attainment and goodput: which requests were good, and how many per second.

The definition, printed in report.md and by ``infertop bench`` (:func:`slo_definition`):
a request is **good** when it completed (status ok) and every objective given holds for
it — TTFT (request sent → first token of any kind, reasoning included) ≤ ``ttft_ms``;
TTFO (request sent → first answer token or tool call: a reasoning model's thinking is
inside it; = TTFT without reasoning) ≤ ``ttfo_ms``; TPOT = (e2e − TTFT) / (output tokens
− 1) ≤ ``tpot_ms``; the request's p90 per-token ITL ≤ ``itl_ms``; e2e ≤ ``e2e_ms``. A
value exactly at its limit meets it. Not good: a failed request; a request whose metric
cannot be computed (TPOT or ITL with fewer than 2 output tokens, TTFO with no answer after
its reasoning); a request *cut* (still in flight when a level's duration limit and drain
ran out, or when a capacity probe stopped early). Cancelled requests (the user's Ctrl-C)
are left out of both counts.

- attainment = good ÷ (ok + failed + cut requests of the level), with a 95 % Wilson
  score interval (the requests taken as independent trials).
- goodput = good requests ÷ the level's wall time (first request sent → last request
  ended), req/s; goodput tok/s = their output tokens ÷ the same wall time.
- per objective: the share of the same requests that met that one objective alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tui.bench.run.records import RequestRecord

_OBJECTIVES = "TTFT; TPOT = (e2e − TTFT)/(output tokens − 1); the request's p90 per-token ITL; e2e"
_OBJECTIVES_TTFO = (
    "TTFT = sent → first token of any kind; TTFO = sent → first answer token or tool call, "
    "the model's thinking before it included; TPOT = (e2e − TTFT)/(output tokens − 1); the "
    "request's p90 per-token ITL; e2e"
)
_UNCOMPUTABLE = "TPOT or ITL with fewer than 2 output tokens"
_UNCOMPUTABLE_TTFO = _UNCOMPUTABLE + ", TTFO with no answer after the thinking"


def slo_definition(keys: Iterable[str] = ()) -> str:
    """The definition as report.md and ``infertop bench`` print it. TTFO is defined in it
    when it is one of the objectives ``keys`` (else the text is as it was before TTFO)."""
    ttfo = "ttfo_ms" in keys
    return (
        "A request is good when it completed and meets every objective given ("
        + (_OBJECTIVES_TTFO if ttfo else _OBJECTIVES)
        + "), a value exactly at its limit meeting it. Failed requests, requests whose "
        "metric cannot be computed ("
        + (_UNCOMPUTABLE_TTFO if ttfo else _UNCOMPUTABLE)
        + ") and requests cut by a duration limit or an early-stopped probe (still in "
        "flight when the level ended) are not good; cancelled ones (Ctrl-C) are left out. "
        "Attainment = good ÷ (ok + failed + cut), with a 95 % Wilson interval; goodput = "
        "good requests ÷ the level's wall time (first sent → last ended), and their output "
        "tokens ÷ the same time."
    )


SLO_DEFINITION = slo_definition(("ttfo_ms",))  # every objective defined


def slo_value(record: RequestRecord, key: str) -> float | None:
    """The request's value for one objective (None: it cannot be computed)."""
    m = record.metrics
    if key == "itl_ms":
        return m.itl_ms_p90
    v = getattr(m, key, None)
    return None if v is None else float(v)


def meets_objective(record: RequestRecord, key: str, limit: float) -> bool:
    if not record.ok:
        return False
    v = slo_value(record, key)
    return v is not None and v <= limit


def meets_slo(record: RequestRecord, slo: dict[str, float]) -> bool:
    """Good: completed, and every objective in ``slo`` met (see the module docstring)."""
    return record.ok and all(meets_objective(record, k, lim) for k, lim in slo.items())


def wilson(good: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """95 % Wilson score interval of a proportion good/n (None for n = 0)."""
    if n <= 0:
        return None
    p = good / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def goodput(
    records: list[RequestRecord], slo: dict[str, float], wall: float | None
) -> dict[str, Any]:
    """Attainment and goodput of a level's records (cancelled ones are left out)."""
    judged = [r for r in records if r.status != "cancelled"]
    good = [r for r in judged if meets_slo(r, slo)]
    n = len(judged)
    iv = wilson(len(good), n)
    return {
        "slo": dict(slo),
        "good": len(good),
        "judged": n,
        "cut": sum(1 for r in judged if r.status == "cut"),
        "failed": sum(1 for r in judged if r.status == "failed"),
        "fraction": len(good) / n if n else None,  # = attainment (older reports' name)
        "attainment": len(good) / n if n else None,
        "attainment_low": iv[0] if iv else None,
        "attainment_high": iv[1] if iv else None,
        "per_objective": {
            k: (sum(1 for r in judged if meets_objective(r, k, lim)) / n if n else None)
            for k, lim in slo.items()
        },
        "requests_per_s": len(good) / wall if wall else None,
        "tokens_per_s": sum(r.metrics.output_tokens or 0 for r in good) / wall if wall else None,
    }
