"""The OpenAI API's ``/v1/chat/completions`` and ``/v1/completions`` streams.

Each SSE ``data`` payload is a ``chat.completion.chunk`` (or ``text_completion``):

- ``choices[].delta.content`` (chat) or ``choices[].text`` (completions): answer text,
  through the ``<think>`` splitter (:mod:`.think`);
- ``delta.reasoning_content`` (llama-server, DeepSeek, vLLM's older parsers) or
  ``delta.reasoning`` (vLLM ≥ 0.10, OpenRouter, Ollama's OpenAI API): reasoning;
- ``delta.tool_calls[]`` (``index``, ``function.name`` on a call's first delta, then
  ``function.arguments`` pieces) and the legacy ``delta.function_call``: a tool call;
- ``choices[].finish_reason``: the end (``[DONE]`` too);
- ``usage`` (``stream_options.include_usage``): on a last chunk whose ``choices`` is
  ``[]``, absent or ``null``; ``completion_tokens_details.reasoning_tokens`` is the
  reasoning part; ``prompt_tokens_details.cached_tokens`` the cached prompt. A usage on
  every chunk (vLLM's continuous usage) gives each chunk its token count: the rise of
  ``completion_tokens`` since the previous usage. A streamed token takes at least one
  byte of the payloads that bring it, so a rise larger than the bytes of the payloads
  since the previous usage is a count no chunk could carry: from then on the stream's
  completion counts are not counts (no per-chunk count, no output or reasoning total;
  the metrics estimate them, and say so). A usage only at the end is not held to it
  (hidden reasoning is counted there and never streamed);
- ``timings`` (llama-server) and ``metrics`` (vLLM's per-request account): their
  documented numbers kept in ``extra`` (:mod:`.fields`); no other field of a payload is
  kept.

A role-only or empty delta is no token (its bytes still mark the first byte).
"""

from __future__ import annotations

from typing import Any

from tui.engines.dialects.base import (
    Emit,
    Framing,
    StreamDecoder,
    count,
    json_loads,
    model_name,
    text_of,
)
from tui.engines.dialects.errors import StreamProtocolError, StreamServerError
from tui.engines.dialects.fields import engine_message, engine_word
from tui.transport.http_io import error_message_from_body


class OpenAIChatDecoder(StreamDecoder):
    """One streamed chat completion (``choices[].delta``)."""

    endpoint = "chat"

    def __init__(self, framing: Framing) -> None:
        super().__init__(framing)
        self.usage: dict[str, Any] | None = None  # the last usage object, as sent
        self.counted_tokens = 0  # running completion_tokens (continuous usage)
        self.carried = 0  # bytes of the payloads since the last usage (what a rise can be)
        self.miscounted = False  # a rise no chunk could carry came: counts are no counts
        self.tool_index: Any = None  # the index of the tool call being written

    def payload(self, data: str | bytes, t_ns: int, emit: Emit) -> None:
        self.carried += len(data)
        try:
            obj = json_loads(data)
        except (ValueError, RecursionError):  # (json, without orjson: nested too deep)
            if isinstance(data, bytes):  # as text: invalid UTF-8 becomes U+FFFD
                self.carried -= len(data)  # (counted again as text)
                return self.payload(data.decode("utf-8", "replace"), t_ns, emit)
            if data.strip() == "[DONE]":
                self.complete = True
                return None
            raise StreamProtocolError(f"malformed stream data: {data[:120]!r}") from None
        if type(obj) is not dict:
            raise StreamProtocolError(f"stream data is not a JSON object: {text_of(data)[:120]!r}")
        get = obj.get
        if get("error"):
            raw = data if isinstance(data, bytes) else data.encode()
            raise StreamServerError(engine_message(error_message_from_body(raw, "json")))
        if self.response_model is None:
            self.response_model = model_name(get("model"))
        usage = get("usage")
        choices = get("choices")
        tokens: int | None = None
        if type(usage) is dict:
            tokens = self.take_usage(usage, t_ns, per_chunk=bool(choices))
        if "timings" in obj:
            self.take_timings(obj["timings"])
        if "metrics" in obj:
            self.take_request_metrics(obj["metrics"])
        if not choices:
            return None
        if type(choices) is not list:
            raise StreamProtocolError(f"'choices' is not a list: {text_of(data)[:120]!r}")
        # Per-chunk counts only when the server counts every chunk (continuous usage).
        k = tokens if tokens is not None and tokens > 0 else None
        for ch in choices:
            if type(ch) is not dict:
                continue
            if self.endpoint == "completions":
                t = ch.get("text")
                if t and type(t) is str:
                    self.answer(t_ns, t, k, emit)
                    k = 0 if k is not None else None
            else:
                delta = ch.get("delta")
                if delta and type(delta) is dict:
                    k = self._delta(delta, t_ns, k, emit)
            reason = engine_word(ch.get("finish_reason"))
            if reason:
                self.finish_reason = reason
        return None

    def _delta(self, delta: dict[str, Any], t_ns: int, k: int | None, emit: Emit) -> int | None:
        """One choice's delta: its reasoning, text and tool-call pieces, in that order.
        Returns the count left for a further piece of the same payload (0 once given)."""
        content = delta.get("content")
        if len(delta) == 1 and content and type(content) is str:  # the usual: text alone
            self.answer(t_ns, content, k, emit)
            return 0 if k is not None else None
        for key in ("reasoning_content", "reasoning"):
            v = delta.get(key)
            if v and type(v) is str:
                self.reasoning(t_ns, v, k, emit)
                k = 0 if k is not None else None
                break
        if content and type(content) is str:
            self.answer(t_ns, content, k, emit)
            k = 0 if k is not None else None
        calls = delta.get("tool_calls")
        if calls and type(calls) is list:
            for call in calls:
                if type(call) is dict:
                    call_key = (call.get("index"), call.get("id") or None)
                    k = self._tool_piece(call_key, call.get("function"), t_ns, k, emit)
        legacy = delta.get("function_call")
        if legacy and type(legacy) is dict:
            k = self._tool_piece(("function_call", None), legacy, t_ns, k, emit)
        return k

    def _tool_piece(
        self, key: tuple[Any, Any], fn: Any, t_ns: int, k: int | None, emit: Emit
    ) -> int | None:
        """A piece of tool call ``key`` = (index, id): a new call when no call is open,
        its index differs from the open one's, or it has an id of its own that differs."""
        if type(fn) is not dict:
            return k
        name, args = fn.get("name"), fn.get("arguments")
        current = self.tool_index
        new = (
            not self.tools.open
            or current is None
            or key[0] != current[0]
            or (key[1] is not None and current[1] is not None and key[1] != current[1])
        )
        if new:
            self.tool_index = key
            self.tool_start(t_ns, name if type(name) is str else "", k, emit)
            k = 0 if k is not None else None
        if args and type(args) is str:
            self.tool_text(t_ns, args, k, emit)
            k = 0 if k is not None else None
        return k

    def take_usage(self, usage: dict[str, Any], t_ns: int, per_chunk: bool = False) -> int | None:
        """Keep the server's counts; the tokens this chunk adds (continuous usage: a
        usage before this one, or on a chunk with choices — ``per_chunk``), None where
        the rise is more than the payloads since the last usage could carry (the module
        docstring)."""
        continuous = per_chunk or self.usage is not None
        self.usage, self.usage_t_ns = usage, t_ns
        self.prompt_tokens = count(usage.get("prompt_tokens"))
        cached = usage.get("prompt_tokens_details")
        if type(cached) is dict:
            self.cached_tokens = count(cached.get("cached_tokens"))
        ct = count(usage.get("completion_tokens"))
        carried, self.carried = self.carried, 0
        if ct is not None and continuous and ct - self.counted_tokens > carried:
            self.miscounted = True
        if self.miscounted:
            self.output_tokens = self.reasoning_tokens = None
            return None
        self.output_tokens = ct
        details = usage.get("completion_tokens_details")
        if type(details) is dict:
            self.reasoning_tokens = count(details.get("reasoning_tokens"))
        if ct is None:
            return None
        added = ct - self.counted_tokens
        self.counted_tokens = ct
        return added


class OpenAICompletionsDecoder(OpenAIChatDecoder):
    """One streamed text completion (``choices[].text``)."""

    endpoint = "completions"
