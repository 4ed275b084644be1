"""An answer that was not streamed (``stream: false``), read whole, as stream events.

Its text comes as one chunk per part (reasoning, answer, each tool call) at the time the
body ended — so its TTFT is its e2e, and the proxy's view shows none — then Usage from
the body's counts, the engine's report where it gives one, and Finished. One reader per
dialect, named by its :class:`~tui.engines.dialects.kinds.Dialect` (which reads with it,
then :func:`finish_whole`):

- ``openai-chat``: ``choices[].message`` — ``reasoning_content``/``reasoning``,
  ``content``, ``tool_calls[].function`` (``name``, ``arguments`` text); ``usage``;
- ``openai-completions``: ``choices[].text``; ``usage``;
- ``openai-responses``: the response object — ``output[]`` items ``reasoning``
  (``content[].text``, else ``summary[].text``), ``message`` (``content[]`` of type
  ``output_text``), ``function_call`` (``name``, ``arguments``); ``usage``;
- ``anthropic``: the message — ``content[]`` blocks ``thinking``, ``text``,
  ``tool_use`` (``name``, ``input``); ``usage``; ``stop_reason``;
- ``ollama``: the ``done`` object; ``llama``: ``/completion``'s object;
- ``embeddings`` / ``rerank``: no text; the prompt's tokens (``usage.prompt_tokens``,
  Ollama's ``prompt_eval_count``) and, from Ollama, its durations.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tui.core.events import EngineReport, Finished, StreamEvent
from tui.engines.dialects.anthropic import AnthropicDecoder, stop_reason
from tui.engines.dialects.base import Emit, StreamDecoder, count
from tui.engines.dialects.fields import engine_word
from tui.engines.dialects.llama import LlamaCompletionDecoder, timings_events
from tui.engines.dialects.ollama import TOOL_ARGS_SHOWN, OllamaDecoder, truth_from_final
from tui.engines.dialects.openai_chat import OpenAIChatDecoder, OpenAICompletionsDecoder
from tui.engines.dialects.responses import ResponsesDecoder

# One answer's object read whole at a stamp, its events emitted: the decoder that read it
# (its finish reason, its counts, what it holds back), for finish_whole
WholeReader = Callable[[dict[str, Any], int, Emit], StreamDecoder]


def _str(v: Any) -> str:
    return v if type(v) is str else ""


def _items(v: Any) -> list[dict[str, Any]]:
    return [x for x in v if type(x) is dict] if type(v) is list else []


def _tool(dec: StreamDecoder, t_ns: int, name: Any, args: Any, emit: Emit) -> None:
    if type(args) is not str:
        try:
            args = json.dumps(args, ensure_ascii=False) if args is not None else ""
        except (TypeError, ValueError, RecursionError):
            args = ""
    dec.tool_start(t_ns, _str(name), None, emit)
    if args:
        dec.tool_text(t_ns, args[:TOOL_ARGS_SHOWN], 0, emit)
    dec.tool_end(t_ns, emit)


def _choices(dec: OpenAIChatDecoder, obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    for ch in _items(obj.get("choices")):
        msg = ch.get("message")
        if type(msg) is dict:
            thought = _str(msg.get("reasoning_content")) or _str(msg.get("reasoning"))
            if thought:
                dec.reasoning(t_ns, thought, None, emit)
            if _str(msg.get("content")):
                dec.answer(t_ns, msg["content"], None, emit)
            for call in _items(msg.get("tool_calls")):
                fn = call.get("function")
                if type(fn) is dict:
                    _tool(dec, t_ns, fn.get("name"), fn.get("arguments"), emit)
        elif _str(ch.get("text")):
            dec.answer(t_ns, ch["text"], None, emit)
        reason = engine_word(ch.get("finish_reason"))
        if reason:
            dec.finish_reason = reason
    usage = obj.get("usage")
    if type(usage) is dict:
        dec.take_usage(usage, t_ns)
    if "timings" in obj:
        dec.take_timings(obj["timings"])
    return dec


def read_chat(obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    """``openai-chat``: ``choices[].message`` (a ``text`` too), ``usage``, ``timings``."""
    return _choices(OpenAIChatDecoder("whole"), obj, t_ns, emit)


def read_completions(obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    """``openai-completions``: ``choices[].text``, ``usage``, ``timings``."""
    return _choices(OpenAICompletionsDecoder("whole"), obj, t_ns, emit)


def read_responses(obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    """``openai-responses``: the response object's ``output[]`` items and ``usage``."""
    dec = ResponsesDecoder("whole")
    for item in _items(obj.get("output")):
        kind = item.get("type")
        if kind == "reasoning":
            parts = _items(item.get("content")) or _items(item.get("summary"))
            thought = "".join(_str(p.get("text")) for p in parts)
            if thought:
                dec.reasoning(t_ns, thought, None, emit)
        elif kind == "message":
            text = "".join(
                _str(p.get("text"))
                for p in _items(item.get("content"))
                if p.get("type") == "output_text"
            )
            if text:
                dec.answer(t_ns, text, None, emit)
        elif kind == "function_call":
            _tool(dec, t_ns, item.get("name"), item.get("arguments"), emit)
    dec.take_end(obj, "stop" if obj.get("status") != "incomplete" else "length", t_ns)
    return dec


def read_anthropic(obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    """``anthropic``: the message's ``content[]`` blocks, ``usage``, ``stop_reason``."""
    dec = AnthropicDecoder("whole")
    for block in _items(obj.get("content")):
        kind = block.get("type")
        if kind == "thinking" and _str(block.get("thinking")):
            dec.reasoning(t_ns, block["thinking"], None, emit)
        elif kind == "text" and _str(block.get("text")):
            dec.answer(t_ns, block["text"], None, emit)
        elif kind in ("tool_use", "server_tool_use"):
            _tool(dec, t_ns, block.get("name"), block.get("input"), emit)
    dec.take_usage(obj.get("usage"), t_ns)
    dec.finish_reason = stop_reason(obj.get("stop_reason"))
    return dec


def read_ollama(obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    """``ollama``: the ``done`` object, read as its last line."""
    dec = OllamaDecoder("whole")
    dec.line(obj, t_ns, emit)
    return dec


def read_llama(obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    """``llama``: ``/completion``'s object, read as its last payload."""
    dec = LlamaCompletionDecoder("whole")
    dec.take(obj, t_ns, emit)
    return dec


def read_prompt_only(obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    """``embeddings`` / ``rerank``: no text; the prompt's count and Ollama's durations."""
    dec = StreamDecoder("whole")
    dec.output_tokens = 0  # an embedding or a ranking generates no token
    usage = obj.get("usage")
    if type(usage) is dict:
        dec.prompt_tokens = count(usage.get("prompt_tokens"))
    elif "prompt_eval_count" in obj or "total_duration" in obj:  # Ollama's /api/embed
        truth = truth_from_final(obj)
        dec.prompt_tokens = truth.prompt_eval_tokens
        emit(EngineReport(t_ns, truth))
    dec.usage_t_ns = t_ns
    return dec


def finish_whole(dec: StreamDecoder, t_ns: int, emit: Emit) -> None:
    """After a reader: the text it held back, Usage, the engine's report, Finished."""
    dec.flush(t_ns, emit)
    usage: StreamEvent | None = dec.usage_event()
    if usage is not None:
        emit(usage)
    for ev in timings_events(dec, t_ns):
        emit(ev)
    emit(Finished(t_ns, dec.finish_reason or "stop", dec.response_model))
