"""Ollama's native stream (``/api/chat``, ``/api/generate``): one JSON object per line.

- ``message.content`` (chat) or ``response`` (generate): answer text (through the
  ``<think>`` splitter, for a model run with ``think: false`` that still writes tags);
- ``message.thinking`` (chat) or ``thinking`` (generate): reasoning (``think: true``);
- ``message.tool_calls[]``: whole tool calls (``function.name``, ``function.arguments``
  an object), each one chunk ``name({...})``;
- the last line has ``done: true``, ``done_reason`` and Ollama's own account in
  nanoseconds (:func:`truth_from_final`).

Ollama omits fields that are zero, so a prompt served from its cache has no
prompt_eval_count: that becomes "not reported" (None), never a guessed number. Its counts
are tokens it *evaluated*: it does not report the prompt's full length. It counts no
thinking tokens apart (``eval_count`` includes them).
"""

from __future__ import annotations

import json
import math
from typing import Any

from tui.core.events import EngineReport, EngineTruth
from tui.engines.dialects.base import Emit, Framing, StreamDecoder, model_name
from tui.engines.dialects.errors import StreamProtocolError, StreamServerError
from tui.engines.dialects.fields import OLLAMA_FINAL, engine_message, engine_word, kept_numbers

NS_PER_MS = 1_000_000
MAX_COUNT = 2**63  # a token count at or past this is not a count
TOOL_ARGS_SHOWN = 64 * 1024  # characters of one whole tool call's arguments kept as text


def truth_from_final(final: dict[str, Any]) -> EngineTruth:
    """EngineTruth from the ``done: true`` line (missing fields stay None)."""

    def ns_ms(key: str) -> float | None:
        v = final.get(key)
        if not isinstance(v, int | float) or isinstance(v, bool):
            return None
        try:
            ms = v / NS_PER_MS  # an int too large for a float raises OverflowError
        except OverflowError:
            return None
        return ms if 0 <= ms < math.inf else None  # NaN, Infinity, < 0: not a duration

    def count(key: str) -> int | None:
        v = final.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < MAX_COUNT:
            return None  # a count no float can hold would break every rate
        return int(v)

    # the done line's numbers only (.fields): no text of a request (``response``,
    # ``thinking``, ``context``) ever reaches a report, a session log or --events
    raw: dict[str, Any] = dict(kept_numbers(final, OLLAMA_FINAL))
    if "prompt_eval_count" not in final:
        raw["note"] = "prompt_eval_count omitted (Ollama omits zero: a prompt-cache hit)"
    eval_count = count("eval_count")
    return EngineTruth(
        prompt_tokens=None,
        prompt_eval_tokens=count("prompt_eval_count"),
        prompt_ms=ns_ms("prompt_eval_duration"),
        output_tokens=eval_count,
        decode_tokens=eval_count,
        decode_ms=ns_ms("eval_duration"),
        load_ms=ns_ms("load_duration"),
        source="ollama durations",
        raw=raw,
    )


def tool_call_text(call: Any) -> tuple[str, str] | None:
    """(name, arguments as JSON text) of one whole Ollama tool call, or None."""
    if type(call) is not dict:
        return None
    fn = call.get("function")
    if type(fn) is not dict:
        return None
    name = fn.get("name")
    args = fn.get("arguments")
    try:
        text = json.dumps(args, ensure_ascii=False) if args is not None else ""
    except (TypeError, ValueError, RecursionError):
        text = ""
    return (name if type(name) is str else ""), text[:TOOL_ARGS_SHOWN]


class OllamaDecoder(StreamDecoder):
    """One Ollama NDJSON stream (see the module docstring)."""

    def __init__(self, framing: Framing) -> None:
        super().__init__(framing)
        self.final: dict[str, Any] | None = None  # the done line
        self.final_t_ns: int | None = None

    def payload(self, data: str | bytes, t_ns: int, emit: Emit) -> None:
        try:  # (json, not orjson: Ollama's lines are few, and json reads NaN as Go never
            obj = json.loads(data)  # writes it, but hand-made servers might)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            raise StreamProtocolError(f"malformed NDJSON line: {str(data)[:120]!r}") from None
        if type(obj) is not dict:
            raise StreamProtocolError(f"NDJSON line is not an object: {str(data)[:120]!r}")
        self.line(obj, t_ns, emit)

    def line(self, obj: dict[str, Any], t_ns: int, emit: Emit) -> None:
        """One parsed line (also a whole answer not streamed, :mod:`.whole`)."""
        if self.response_model is None:
            self.response_model = model_name(obj.get("model"))
        if obj.get("error"):
            raise StreamServerError(f"server error: {engine_message(obj['error'])}")
        msg = obj.get("message")
        if type(msg) is dict:
            thinking, text, calls = msg.get("thinking"), msg.get("content"), msg.get("tool_calls")
        else:
            thinking, text, calls = obj.get("thinking"), obj.get("response"), None
        if thinking and type(thinking) is str:
            self.reasoning(t_ns, thinking, None, emit)
        if text and type(text) is str:
            self.answer(t_ns, text, None, emit)
        if calls and type(calls) is list:
            for call in calls:
                named = tool_call_text(call)
                if named is not None:
                    self.tool_start(t_ns, named[0], None, emit)
                    if named[1]:
                        self.tool_text(t_ns, named[1], 0, emit)
                    self.tool_end(t_ns, emit)
        if obj.get("done") is True:
            self.complete = True
            self.final, self.final_t_ns = obj, t_ns
            self.finish_reason = engine_word(obj.get("done_reason")) or "stop"
            truth = truth_from_final(obj)
            self.usage_t_ns = t_ns
            self.prompt_tokens = truth.prompt_eval_tokens
            self.output_tokens = truth.output_tokens
            emit(EngineReport(t_ns, truth))
