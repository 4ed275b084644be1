"""The OpenAI Responses API's stream (``POST /v1/responses``, ``stream: true``): what
Codex CLI and the Agents SDK speak.

Each SSE event's data is a JSON object whose ``type`` names it (the SSE ``event:`` line
repeats it; the data alone is read):

- ``response.output_text.delta`` (``delta``): answer text;
- ``response.reasoning_text.delta`` (vLLM, llama-server, gpt-oss) and
  ``response.reasoning_summary_text.delta`` (OpenAI's reasoning summaries): reasoning;
- ``response.output_item.added`` with an item of type ``function_call`` (its ``name``):
  a tool call begins; ``response.function_call_arguments.delta``: its arguments;
  ``response.output_item.done`` of that item: it ends;
- ``response.completed`` / ``response.incomplete``: the end, with ``response.usage``
  (``input_tokens``, ``output_tokens``, ``output_tokens_details.reasoning_tokens``,
  ``input_tokens_details.cached_tokens``) and, when incomplete, why
  (``incomplete_details.reason``: ``max_output_tokens`` is a finish of "length");
  llama-server adds its ``timings`` to the event (the engine's report);
- ``response.failed`` and ``error``: the server's error.

Never counted: every ``*.done`` event (``response.output_text.done`` repeats the whole
text, ``response.content_part.done`` and ``response.output_item.done`` the whole part or
item) and ``response.created`` / ``in_progress`` (no token).
"""

from __future__ import annotations

from typing import Any

from tui.core.events import OwnReason
from tui.engines.dialects.base import Emit, StreamDecoder, count, model_name, parse_object
from tui.engines.dialects.errors import StreamServerError
from tui.engines.dialects.fields import engine_message, engine_word

_REASONING = frozenset(
    (
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning.delta",  # (an older name some servers still send)
    )
)
_END: dict[str, OwnReason] = {"response.completed": "stop", "response.incomplete": "length"}


def _error_text(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    if type(err) is dict:
        msg = err.get("message") or err.get("code")
        if msg:
            return engine_message(msg)
    if type(err) is str and err:
        return engine_message(err)
    msg = obj.get("message")
    return engine_message(msg) if msg else "the server reported an error"


class ResponsesDecoder(StreamDecoder):
    """One streamed response of the Responses API (see the module docstring)."""

    def payload(self, data: str | bytes, t_ns: int, emit: Emit) -> None:
        if data == b"[DONE]" or data == "[DONE]":  # not the API's, but some servers add it
            self.complete = True
            return
        obj = parse_object(data)
        kind = obj.get("type")
        if kind == "response.output_text.delta":
            delta = obj.get("delta")
            if delta and type(delta) is str:
                self.answer(t_ns, delta, None, emit)
        elif kind in _REASONING:
            delta = obj.get("delta")
            if delta and type(delta) is str:
                self.reasoning(t_ns, delta, None, emit)
        elif kind == "response.function_call_arguments.delta":
            delta = obj.get("delta")
            if delta and type(delta) is str:
                if not self.tools.open:  # (the item's "added" event never came)
                    self.tool_start(t_ns, "", None, emit)
                self.tool_text(t_ns, delta, None, emit)
        elif kind == "response.output_item.added":
            item = obj.get("item")
            if type(item) is dict and item.get("type") == "function_call":
                name = item.get("name")
                self.tool_start(t_ns, name if type(name) is str else "", None, emit)
        elif kind == "response.output_item.done":
            item = obj.get("item")
            if type(item) is dict and item.get("type") == "function_call":
                self.tool_end(t_ns, emit)
        elif kind in _END:
            self.take_end(obj.get("response"), _END[kind], t_ns)
            if "timings" in obj:  # llama-server's own numbers
                self.take_timings(obj["timings"])
        elif kind == "response.failed":
            response = obj.get("response")
            raise StreamServerError(_error_text(response if type(response) is dict else obj))
        elif kind == "error":
            raise StreamServerError(_error_text(obj))

    def take_end(self, response: Any, reason: OwnReason, t_ns: int) -> None:
        """The response ended (``reason`` unless its ``incomplete_details`` say why):
        its finish and its counts."""
        self.complete = True
        self.finish_reason = reason
        if type(response) is dict:
            self.response_model = model_name(response.get("model")) or self.response_model
        if type(response) is not dict:
            return
        details = response.get("incomplete_details")
        why = engine_word(details.get("reason")) if type(details) is dict else None
        if why:
            self.finish_reason = "length" if why == "max_output_tokens" else why
        usage = response.get("usage")
        if type(usage) is not dict:
            return
        self.usage_t_ns = t_ns
        self.prompt_tokens = count(usage.get("input_tokens"))
        self.output_tokens = count(usage.get("output_tokens"))
        out_details = usage.get("output_tokens_details")
        if type(out_details) is dict:
            self.reasoning_tokens = count(out_details.get("reasoning_tokens"))
        in_details = usage.get("input_tokens_details")
        if type(in_details) is dict:
            self.cached_tokens = count(in_details.get("cached_tokens"))
