"""Anthropic's Messages API stream (``POST /v1/messages``, ``stream: true``): what Claude
Code speaks, and llama-server serves too.

Each SSE event's data is a JSON object whose ``type`` names it:

- ``message_start``: ``message.usage`` — ``input_tokens`` (the prompt not read from a
  cache), ``cache_read_input_tokens``, ``cache_creation_input_tokens``; the prompt's
  tokens are their sum, the cached ones the first of the two;
- ``content_block_start``: a block of type ``text``, ``thinking``, ``redacted_thinking``
  or ``tool_use`` (its ``name``: a tool call begins);
- ``content_block_delta``: ``text_delta`` (``text``): answer; ``thinking_delta``
  (``thinking``): reasoning; ``input_json_delta`` (``partial_json``): the tool call's
  arguments; ``signature_delta``: no token;
- ``content_block_stop``: a block ends (a tool call's ``)``);
- ``message_delta``: ``delta.stop_reason`` and ``usage.output_tokens`` (the running
  total: the last one counts);
- ``message_stop``: the end; ``ping``: nothing; ``error``: the server's error.

The API counts no reasoning tokens apart: ``output_tokens`` includes the thinking, and
the reasoning/answer split is the estimate of :mod:`tui.core.metrics`.
"""

from __future__ import annotations

from typing import Any

from tui.core.events import FinishReason, OwnReason
from tui.engines.dialects.base import Emit, Framing, StreamDecoder, count, model_name, parse_object
from tui.engines.dialects.errors import StreamServerError
from tui.engines.dialects.fields import engine_message, engine_word

STOP_REASONS: dict[str, OwnReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}


def stop_reason(reason: Any) -> FinishReason:
    """Anthropic's ``stop_reason`` as a finish reason ("stop" where it gave none)."""
    word = engine_word(reason)
    return STOP_REASONS.get(word, word) if word else "stop"


class AnthropicDecoder(StreamDecoder):
    """One streamed message (see the module docstring)."""

    def __init__(self, framing: Framing) -> None:
        super().__init__(framing)
        self.block_is_tool = False

    def payload(self, data: str | bytes, t_ns: int, emit: Emit) -> None:
        obj = parse_object(data)
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = obj.get("delta")
            if type(delta) is not dict:
                return
            dk = delta.get("type")
            if dk == "text_delta":
                text = delta.get("text")
                if text and type(text) is str:
                    self.answer(t_ns, text, None, emit)
            elif dk == "thinking_delta":
                text = delta.get("thinking")
                if text and type(text) is str:
                    self.reasoning(t_ns, text, None, emit)
            elif dk == "input_json_delta":
                text = delta.get("partial_json")
                if text and type(text) is str:
                    if not self.tools.open:
                        self.tool_start(t_ns, "", None, emit)
                    self.tool_text(t_ns, text, None, emit)
        elif kind == "content_block_start":
            block = obj.get("content_block")
            self.block_is_tool = type(block) is dict and block.get("type") in (
                "tool_use",
                "server_tool_use",
            )
            if self.block_is_tool and type(block) is dict:
                name = block.get("name")
                self.tool_start(t_ns, name if type(name) is str else "", None, emit)
        elif kind == "content_block_stop":
            if self.block_is_tool:
                self.tool_end(t_ns, emit)
                self.block_is_tool = False
        elif kind == "message_delta":
            self._delta(obj, t_ns)
        elif kind == "message_start":
            message = obj.get("message")
            if type(message) is dict:
                self.response_model = model_name(message.get("model"))
                self.take_usage(message.get("usage"), t_ns)
        elif kind == "message_stop":
            self.complete = True
            self.finish_reason = self.finish_reason or "stop"
        elif kind == "error":
            err = obj.get("error")
            msg = err.get("message") if type(err) is dict else None
            raise StreamServerError(engine_message(msg or "the server reported an error"))

    def _delta(self, obj: dict[str, Any], t_ns: int) -> None:
        delta = obj.get("delta")
        if type(delta) is dict:
            reason = delta.get("stop_reason")
            if reason and type(reason) is str:
                self.finish_reason = stop_reason(reason)
        self.take_usage(obj.get("usage"), t_ns)

    def take_usage(self, usage: Any, t_ns: int) -> None:
        """Keep the counts of a ``usage`` object (``message_start``'s or a
        ``message_delta``'s: the output count is a running total, the last one counts)."""
        if type(usage) is not dict:
            return
        self.usage_t_ns = t_ns
        out = count(usage.get("output_tokens"))
        if out is not None:
            self.output_tokens = out
        fresh = count(usage.get("input_tokens"))
        read = count(usage.get("cache_read_input_tokens"))
        made = count(usage.get("cache_creation_input_tokens"))
        if fresh is not None:
            self.prompt_tokens = fresh + (read or 0) + (made or 0)
        if read is not None:
            self.cached_tokens = read
