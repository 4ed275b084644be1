"""RequestRow: one proxied request as the requests view shows it, and its JSON form.

Live numbers (exact definitions; a finished request's come from
:func:`tui.core.metrics.compute_metrics` instead, the same as everywhere in infertop):

- ``output_tokens``: generated tokens so far — the engine's per-chunk counts where it
  gives them, else one per chunk that carries text (``output_estimated`` is then True);
  once finished, the engine's total (usage / ``eval_count`` / ``timings.predicted_n``)
  where it reported one.
- ``ttft_ms``: first chunk carrying text (reasoning included) − request forwarded upstream.
- ``ttfo_ms``: first chunk of answer text or of a tool call − request forwarded upstream.
- ``reasoning_tokens``: of ``output_tokens``, those in reasoning chunks (counted the same
  way); once finished, :func:`tui.core.metrics.reasoning_token_count`.
- ``tps``: (output_tokens − 1) / (t_last − t_first) over the chunks with text so far.
- ``itl_p50_ms``: median per-token gap over the last :data:`tui.core.live.ITL_WINDOW` gaps.

The live numbers are :class:`tui.core.live.LiveCounts`', the same as the chat panes'.
- ``age_ms``: time since the request reached the proxy, as of the row's making.
- ``who``: its client as far as the proxy can tell (tui/proxy/identity.py): a name from
  config, the body's user, the API key's fingerprint, the program, the process.

A row read from a proxy (:func:`row_from_json`) is untrusted: each field is checked for
type and range, text is cut short, and a bad row is refused (ValueError) — never shown.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any

from tui.core.events import end_reason_of
from tui.core.metrics import COUNT_SOURCES, PREFILL_SOURCES, RequestMetrics
from tui.core.trace_context import is_trace_id


class RequestState(str, Enum):
    """Where a proxied request is (its JSON form, and its text, is the value)."""

    PREFILL = "prefill"  # forwarded upstream, no text yet
    DECODING = "decoding"  # its answer's text is coming
    DONE = "done"  # answered to its end
    FAILED = "failed"  # the upstream's error status, a broken stream, an internal fault
    CANCELLED = "cancelled"  # its client went away first

    def __str__(self) -> str:
        return self.value


STATES = tuple(s.value for s in RequestState)
TEXT_LIMIT = 300  # characters of any one text field of a row
MAX_COUNT = 2**53


@dataclass
class RequestRow:
    """One request (see the module docstring for each live number)."""

    id: str
    client: str
    method: str
    route: str
    model: str | None
    stream: bool | None
    state: RequestState
    status: int | None = None
    age_ms: float = 0.0
    prompt_tokens: int | None = None
    output_tokens: int = 0
    output_estimated: bool = False
    ttft_ms: float | None = None
    tps: float | None = None
    itl_p50_ms: float | None = None
    e2e_ms: float | None = None
    error: str | None = None
    ttfo_ms: float | None = None
    reasoning_tokens: int | None = None
    who: str | None = None  # who sent it (tui/core/outcome.py ClientIdentity.label)
    trace_id: str | None = None  # its span's W3C trace id (with OTLP export or propagation)

    @property
    def key(self) -> str:
        return self.id

    @property
    def in_flight(self) -> bool:
        return self.state in (RequestState.PREFILL, RequestState.DECODING)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _text(d: dict[str, Any], key: str, required: bool = False) -> str | None:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise ValueError(f"{key} is not text")
    return v[:TEXT_LIMIT]


def _number(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"{key} is not a finite number")
    if abs(v) > 1e15:
        raise ValueError(f"{key} is out of range")
    return float(v)


def _count(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < MAX_COUNT:
        raise ValueError(f"{key} is not a count")
    return v


def _flag(d: dict[str, Any], key: str) -> bool | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, bool):
        raise ValueError(f"{key} is not true/false")
    return v


def row_from_json(d: Any) -> RequestRow:
    """A row from a proxy's JSON (untrusted: ValueError names the first bad field)."""
    if not isinstance(d, dict):
        raise ValueError("a row is not an object")
    text = _text(d, "state", required=True)
    try:
        state = RequestState(text)
    except ValueError:
        raise ValueError(f"unknown state {str(text)[:20]!r}") from None
    status = _count(d, "status")
    return RequestRow(
        id=_text(d, "id", required=True) or "",
        client=_text(d, "client") or "",
        method=_text(d, "method") or "",
        route=_text(d, "route") or "",
        model=_text(d, "model"),
        stream=_flag(d, "stream"),
        state=state,
        status=status if status is None or status < 1000 else None,
        age_ms=max(0.0, _number(d, "age_ms") or 0.0),
        prompt_tokens=_count(d, "prompt_tokens"),
        output_tokens=_count(d, "output_tokens") or 0,
        output_estimated=bool(_flag(d, "output_estimated")),
        ttft_ms=_number(d, "ttft_ms"),
        tps=_number(d, "tps"),
        itl_p50_ms=_number(d, "itl_p50_ms"),
        e2e_ms=_number(d, "e2e_ms"),
        error=_text(d, "error"),
        ttfo_ms=_number(d, "ttfo_ms"),
        reasoning_tokens=_count(d, "reasoning_tokens"),
        who=_text(d, "who"),
        trace_id=_trace_id(d),
    )


def _trace_id(d: dict[str, Any]) -> str | None:
    v = _text(d, "trace_id")
    if v is not None and not is_trace_id(v):
        raise ValueError("trace_id is not a W3C trace id")
    return v


def metrics_from_json(d: Any) -> RequestMetrics:
    """A request's metrics from a proxy's JSON (``RequestMetrics.to_dict`` without the
    ITL lists; untrusted: ValueError names the first bad field)."""
    if not isinstance(d, dict):
        raise ValueError("metrics is not an object")
    kw: dict[str, Any] = {}
    for f in fields(RequestMetrics):
        if f.name in ("itl_chunk_ms", "itl_token_ms", "itl_token_weights"):
            continue
        if f.name in _COUNT_FIELDS:
            kw[f.name] = _count(d, f.name)
        elif f.name in _TEXT_FIELDS:
            kw[f.name] = _text(d, f.name)
        elif f.name in _FLAG_FIELDS:
            kw[f.name] = bool(_flag(d, f.name))
        else:
            kw[f.name] = _number(d, f.name)
    kw["content_chunks"] = kw["content_chunks"] or 0
    kw["output_tokens_source"] = kw["output_tokens_source"] or "chunk-count-estimate"
    for name, allowed in _KIND_FIELDS.items():  # the kinds' own words, or none
        if kw[name] is not None and kw[name] not in allowed:
            raise ValueError(f"{name} is not one of {', '.join(allowed)}")
    kw["finish_reason"] = end_reason_of(kw["finish_reason"])
    return RequestMetrics(**kw)


_COUNT_FIELDS = (
    "prompt_tokens",
    "output_tokens",
    "content_chunks",
    "reasoning_tokens",
    "answer_tokens",
)
_TEXT_FIELDS = (
    "prefill_tps_source",
    "output_tokens_source",
    "finish_reason",
    "error",
    "reasoning_tokens_source",
)
_FLAG_FIELDS = ("itl_token_estimated", "answer_tokens_estimated")
_KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "prefill_tps_source": PREFILL_SOURCES,
    "output_tokens_source": COUNT_SOURCES,
    "reasoning_tokens_source": COUNT_SOURCES,
}
