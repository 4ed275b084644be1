"""One finished request as one GenAI span: what infertop exports, without the SDK.

:func:`span_of` turns a :class:`~tui.core.outcome.RequestOutcome` into a
:class:`SpanData` — name ``{operation} {model}``, kind CLIENT, the request's own stamps
as start and end (``t0_wall``, and the stream's end ``t0_wall + (t_end_ns - t0_ns)``:
never the time of export), the ids of its trace context, and the attributes of
:mod:`tui.otel.conventions`:

- ``gen_ai.usage.*``: the engine's counts only; a count infertop estimated (chunks
  counted) is ``infertop.usage.*.estimate`` instead, never passed off as usage.
- ``gen_ai.response.time_to_first_chunk``: TTFT of a streamed request (first chunk with
  text, reasoning included − request sent), the same stamps as every TTFT infertop shows.
- ``server.address`` / ``server.port``: the server behind the proxy (the upstream), or
  the chat's and bench's server; absent for an engine in infertop's own process.
- ``infertop.verdict`` / ``infertop.verdict.text``: why it took its time (the
  request's verdict kind and its line, tui/core/verdict.py: numbers and fixed words
  only), where its place gave one.
- ``error.type``: a failed request's kind (``connect``, ``timeout``, ``http``,
  ``protocol``, ``engine``, ...); a cancelled one is no error (``infertop.state``).

No text of a request is ever in it, except where :func:`span_of` is given ``content``
(the user's own chat with ``capture_content`` on: tui/otel/export.py decides).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from tui.core.events import TRUTH_NUMBERS
from tui.core.outcome import RequestOutcome
from tui.otel import conventions as C

AttrValue = str | bool | int | float | list[str]
SpanStatus = Literal["unset", "error"]
ESTIMATE = "chunk-count-estimate"


@dataclass
class SpanData:
    """A span as infertop makes it (tui/otel/export.py hands it to the SDK)."""

    name: str
    trace_id: str | None  # 32 hex digits (None: the exporter makes ids)
    span_id: str | None
    parent_id: str | None
    start_ns: int  # epoch nanoseconds
    end_ns: int
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    status: SpanStatus = "unset"
    status_message: str | None = None
    kind: Literal["client"] = "client"


@functools.lru_cache(maxsize=64)  # a front end has one upstream, or a few: parsed once
def server_of(upstream: str) -> tuple[str | None, int | None]:
    """(server.address, server.port) of an upstream URL; (None, None) for an engine name."""
    if "://" not in upstream:
        return None, None
    try:
        parts = urlsplit(upstream)
        port = parts.port
    except ValueError:
        return None, None
    if not parts.hostname:
        return None, None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return parts.hostname, port


def span_of(o: RequestOutcome, content: dict[str, str] | None = None) -> SpanData:
    """The span of one finished request (see the module docstring). ``content``: the
    input and output messages, as JSON text, for ``gen_ai.input.messages`` /
    ``gen_ai.output.messages`` (only ever the user's own chat)."""
    m = o.metrics
    op = C.operation_of(o.route, o.api)
    start = round(o.t0_wall * 1e9)
    end = start + max(0, o.t_end_ns - o.t0_ns)
    a: dict[str, AttrValue] = {
        C.GEN_AI_OPERATION_NAME: op,
        C.GEN_AI_PROVIDER_NAME: C.provider_of(o.kind),
        C.INFERTOP_SOURCE: o.source,
        C.INFERTOP_REQUEST_ID: o.id,
        C.INFERTOP_ROUTE: o.route,
        C.INFERTOP_API: o.api,
        C.INFERTOP_STATE: o.state,
    }
    if o.model:
        a[C.GEN_AI_REQUEST_MODEL] = o.model
    if o.response_model:
        a[C.GEN_AI_RESPONSE_MODEL] = o.response_model
    if o.streamed is not None:
        a[C.GEN_AI_REQUEST_STREAM] = o.streamed
    if o.state == "done" and m.finish_reason:
        a[C.GEN_AI_RESPONSE_FINISH_REASONS] = [m.finish_reason]
    address, port = server_of(o.upstream)
    if address is not None and port is not None:
        a[C.SERVER_ADDRESS] = address
        a[C.SERVER_PORT] = port
    _usage(a, o)
    _times(a, o)
    label = o.client.label
    if label != "unknown":
        a[C.INFERTOP_CLIENT] = label
    _truth(a, o)
    if o.verdict is not None:
        a[C.INFERTOP_VERDICT] = o.verdict.kind
        a[C.INFERTOP_VERDICT_TEXT] = o.verdict.text[:300]
    if content is not None:
        for key in (C.GEN_AI_INPUT_MESSAGES, C.GEN_AI_OUTPUT_MESSAGES):
            if key in content:
                a[key] = content[key]
    span = SpanData(
        name=f"{op} {o.model}" if o.model else op,
        trace_id=o.trace_id,
        span_id=o.span_id,
        parent_id=o.parent_span_id,
        start_ns=start,
        end_ns=end,
        attributes=a,
    )
    if o.state == "failed":
        a[C.ERROR_TYPE] = o.error_kind or "_OTHER"
        span.status = "error"
        span.status_message = (m.error or o.error_kind or "failed")[:300]
    return span


def _usage(a: dict[str, AttrValue], o: RequestOutcome) -> None:
    m = o.metrics
    if m.prompt_tokens is not None:
        a[C.GEN_AI_USAGE_INPUT_TOKENS] = m.prompt_tokens
    if m.output_tokens is not None:
        a[C.INFERTOP_OUTPUT_TOKENS_SOURCE] = m.output_tokens_source
        if m.output_tokens_estimated:
            a[C.INFERTOP_OUTPUT_TOKENS_ESTIMATE] = m.output_tokens
        else:
            a[C.GEN_AI_USAGE_OUTPUT_TOKENS] = m.output_tokens
    if m.reasoning_tokens is not None:
        a[C.INFERTOP_REASONING_TOKENS_SOURCE] = m.reasoning_tokens_source or ""
        if m.reasoning_tokens_source == ESTIMATE:
            a[C.INFERTOP_REASONING_TOKENS_ESTIMATE] = m.reasoning_tokens
        else:
            a[C.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = m.reasoning_tokens
    truth = o.truth
    if truth is not None and truth.cached_tokens is not None:
        a[C.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = truth.cached_tokens


def _times(a: dict[str, AttrValue], o: RequestOutcome) -> None:
    m = o.metrics
    streamed = o.streamed is not False
    ttft = m.ttft_ms
    if streamed and ttft is not None:
        a[C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = a[C.INFERTOP_TTFT] = ttft / 1000.0
    if streamed and m.ttfo_ms is not None:
        a[C.INFERTOP_TTFO] = m.ttfo_ms / 1000.0
    if m.thinking_ms is not None:
        a[C.INFERTOP_THINKING] = m.thinking_ms / 1000.0
    if m.itl_token_ms:
        itl_p50, itl_p90 = m.itl_token_p50_p90()  # one sort for both
        if itl_p50 is not None:
            a[C.INFERTOP_ITL_P50] = itl_p50 / 1000.0
        if itl_p90 is not None:
            a[C.INFERTOP_ITL_P90] = itl_p90 / 1000.0
    if m.decode_tps is not None:
        a[C.INFERTOP_DECODE_TPS] = m.decode_tps
    if m.prefill_tps is not None:
        a[C.INFERTOP_PREFILL_TPS] = m.prefill_tps
    if m.itl_token_ms:
        a[C.INFERTOP_ITL_ESTIMATED] = m.itl_token_estimated


def _truth(a: dict[str, AttrValue], o: RequestOutcome) -> None:
    truth = o.truth
    if truth is None:
        return
    if truth.source:
        a[C.INFERTOP_ENGINE_SOURCE] = truth.source
    for name in TRUTH_NUMBERS:
        value = getattr(truth, name)
        if value is not None:
            a[C.INFERTOP_ENGINE_PREFIX + name] = value


def messages_json(messages: list[dict[str, Any]]) -> str:
    """Chat messages as the conventions' ``gen_ai.input.messages`` JSON (role and text
    parts)."""
    out = [
        {"role": str(msg.get("role", "user")), "parts": [{"type": "text", "content": str(text)}]}
        for msg in messages
        if (text := msg.get("content")) is not None
    ]
    return json.dumps(out, ensure_ascii=False)


def answer_json(text: str, finish_reason: str | None) -> str:
    """An answer as the conventions' ``gen_ai.output.messages`` JSON."""
    msg = {
        "role": "assistant",
        "parts": [{"type": "text", "content": text}],
        "finish_reason": finish_reason or "stop",
    }
    return json.dumps([msg], ensure_ascii=False)
