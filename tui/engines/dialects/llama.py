"""llama-server's own numbers: its ``timings`` object, and its native ``/completion``
stream.

``timings`` (on the last chunk of an OpenAI-API stream, on ``/completion``'s last
payload, on every chunk with ``timings_per_token``): prompt_n (prompt tokens evaluated;
prefix-cache hits excluded), prompt_ms, predicted_n, predicted_ms, predicted_per_second,
cache_n (prompt tokens reused from the cache), draft_n and draft_n_accepted (speculative
decoding); the engine's report keeps these documented numbers only
(:data:`.fields.LLAMA_TIMINGS`). predicted_ms spans first to last generated
token, so the engine's decode speed is (predicted_n − 1) / predicted_ms — the same
definition as ours, and exactly llama-server's predicted_per_second.

``/completion`` streams ``content`` per payload (answer text) and ends with a payload
whose ``stop`` is true, carrying ``tokens_predicted``, ``tokens_evaluated``,
``stop_type`` and ``timings``.
"""

from __future__ import annotations

import json
from typing import Any

from tui.core.events import EngineReport, EngineTruth, StreamEvent, Usage
from tui.engines.dialects.base import Emit, Framing, StreamDecoder, count, parse_object
from tui.engines.dialects.errors import StreamServerError
from tui.engines.dialects.fields import (
    LLAMA_TIMINGS,
    engine_message,
    engine_word,
    kept_numbers,
)
from tui.engines.dialects.vllm_request import truth_from_request_metrics
from tui.transport.http_io import error_message_from_body


def truth_from_timings(timings: dict[str, Any], usage: dict[str, Any] | None) -> EngineTruth:
    """EngineTruth from llama-server's ``timings`` (and ``usage`` for the totals)."""

    def num(d: dict[str, Any] | None, key: str) -> float | None:
        v = (d or {}).get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def whole(d: dict[str, Any] | None, key: str) -> int | None:
        v = num(d, key)
        return None if v is None or not 0 <= v < 2**53 else int(v)

    prompt_n, cache_n = whole(timings, "prompt_n"), whole(timings, "cache_n")
    prompt_total = whole(usage, "prompt_tokens")
    if prompt_total is None and prompt_n is not None:
        prompt_total = prompt_n + (cache_n or 0)
    predicted_n = whole(timings, "predicted_n")
    return EngineTruth(
        prompt_tokens=prompt_total,
        prompt_eval_tokens=prompt_n,
        prompt_ms=num(timings, "prompt_ms"),
        output_tokens=whole(usage, "completion_tokens") or predicted_n,
        # predicted_ms runs from the first generated token to the last: N − 1 tokens in it
        # (llama-server's own predicted_per_second is (predicted_n − 1) / predicted_ms).
        decode_tokens=None if predicted_n is None else max(predicted_n - 1, 0),
        decode_ms=num(timings, "predicted_ms"),
        cached_tokens=cache_n,
        source="llama-server timings",
        raw=kept_numbers(timings, LLAMA_TIMINGS),
    )


USAGE_CACHED_SOURCE = "usage: cached prompt tokens"


def cached_truth(decoder: StreamDecoder) -> EngineTruth | None:
    """The one engine number an answer's usage may carry besides counts: the prompt
    tokens read from the server's cache (chat ``prompt_tokens_details.cached_tokens``,
    Responses ``input_tokens_details.cached_tokens``, Messages
    ``cache_read_input_tokens``); None when it says none."""
    cached = decoder.cached_tokens
    if cached is None:
        return None
    prompt = decoder.prompt_tokens
    computed = None if prompt is None or prompt < cached else prompt - cached
    return EngineTruth(
        prompt_tokens=prompt,
        prompt_eval_tokens=computed,
        cached_tokens=cached,
        source=USAGE_CACHED_SOURCE,
    )


def decoder_truth(decoder: StreamDecoder) -> EngineTruth | None:
    """The engine's report from the ``timings`` a stream carried (None: it carried none),
    with the totals the decoder counted (a count it found no count is not taken back
    from the server's ``usage``)."""
    timings = decoder.extra.get("timings")
    if type(timings) is not dict:
        return None
    counted = {"prompt_tokens": decoder.prompt_tokens, "completion_tokens": decoder.output_tokens}
    return truth_from_timings(timings, counted)


def timings_events(decoder: StreamDecoder, t_ns: int) -> list[EngineReport | Usage]:
    """The engine's report from the ``timings`` a stream carried (llama-server), else
    from its per-request ``metrics`` (vLLM: tui/engines/dialects/vllm_request.py), else
    the cached prompt tokens its usage gave; none: []. And, when the client asked for
    no usage, llama-server's counts as Usage."""
    truth = decoder_truth(decoder)
    if truth is None:
        counted = {
            "prompt_tokens": decoder.prompt_tokens,
            "completion_tokens": decoder.output_tokens,
        }
        other = truth_from_request_metrics(
            decoder.extra.get("metrics"), counted, decoder.cached_tokens
        )
        if other is None:
            other = cached_truth(decoder)
        return [] if other is None else [EngineReport(t_ns, other)]
    out: list[EngineReport | Usage] = []
    if decoder.output_tokens is None and decoder.prompt_tokens is None:
        out.append(Usage(t_ns, truth.prompt_tokens, truth.output_tokens))
    out.append(EngineReport(t_ns, truth))
    return out


class LlamaCompletionDecoder(StreamDecoder):
    """llama-server's ``/completion`` stream (see the module docstring)."""

    def __init__(self, framing: Framing) -> None:
        super().__init__(framing)
        self.final: dict[str, Any] | None = None
        self.final_t_ns = 0

    def payload(self, data: str | bytes, t_ns: int, emit: Emit) -> None:
        obj = parse_object(data)
        self.take(obj, t_ns, emit)

    def take(self, obj: dict[str, Any], t_ns: int, emit: Emit) -> None:
        """One payload, parsed (also a whole answer not streamed, :mod:`.whole`)."""
        if obj.get("error"):
            body = json.dumps(obj).encode()
            raise StreamServerError(engine_message(error_message_from_body(body, "json")))
        text = obj.get("content")
        if text and type(text) is str:
            self.answer(t_ns, text, None, emit)
        if obj.get("stop") is True:
            self.complete = True
            self.final, self.final_t_ns = obj, t_ns
            self.finish_reason = engine_word(obj.get("stop_type")) or "stop"
            self.usage_t_ns = t_ns
            self.prompt_tokens = count(obj.get("tokens_evaluated"))
            self.output_tokens = count(obj.get("tokens_predicted"))
            timings = obj.get("timings")
            if type(timings) is dict:
                usage = {
                    "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.output_tokens,
                }
                emit(EngineReport(t_ns, truth_from_timings(timings, usage)))

    def end(self, t_ns: int) -> StreamEvent:
        if self.final is not None:
            self.last_t_ns = self.final_t_ns
        return super().end(t_ns)
