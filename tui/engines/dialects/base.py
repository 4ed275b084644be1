"""StreamDecoder: the bytes of one streamed answer, in one wire format, to stream events.

One decoder per wire format (:mod:`tui.engines.dialects`), shared by infertop's own
engines and by the proxy, which reads a copy of other clients' answers: both get the same
events from the same bytes. A decoder is fed each read of the body with the stamp taken
where its bytes arrived, and emits, in order:

- :class:`~tui.core.events.TextChunk` per payload that carries generated text, with its
  ``part``: answer, reasoning, or tool call (``name(`` then the arguments as they stream,
  then ``)`` as a chunk of no token of its own);
- after the body (:meth:`StreamDecoder.close`): :class:`~tui.core.events.Usage` with
  what the engine counted (prompt, output and reasoning tokens), where it counted;
- :meth:`StreamDecoder.end` gives the last event: Finished, or Failed when the stream
  ended before the server said it was over.

Never counted: a payload that only repeats what was streamed (the Responses API's
``*.done`` events, Anthropic's ``content_block_stop``), a role-only or empty delta.

Bounds: the framing (:mod:`tui.transport.sse`) caps one event or line at 16 MiB; each
payload is parsed once (orjson, linear); a tool call's arguments are passed on as they
come, never gathered. Anything that is not the protocol raises StreamProtocolError (a
Failed of kind "protocol"), an error the server put in the stream StreamServerError.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from tui.core.events import (
    ANSWER,
    MODEL_CHARS,
    REASONING,
    TOOL,
    Failed,
    Finished,
    FinishReason,
    StreamEvent,
    TextChunk,
    Usage,
    model_name,
)
from tui.engines.dialects.errors import StreamProtocolError
from tui.engines.dialects.fields import (
    LLAMA_TIMINGS,
    VLLM_REQUEST,
    VLLM_SPECULATION,
    kept_numbers,
)
from tui.engines.dialects.think import ThinkSplitter
from tui.transport.sse import NDJSONDecoder, SSEDecoder

try:  # orjson parses a stream chunk ~3x faster than json (client CPU per token)
    from orjson import loads as json_loads
except ImportError:  # pragma: no cover - a dependency; json gives the same objects
    from json import loads as json_loads  # type: ignore[assignment]

Emit = Callable[[StreamEvent], None]
# How a dialect's answers come: server-sent events (``data:`` payloads), one JSON object
# per line (NDJSON), or only whole (never streamed: one JSON object)
Framing = Literal["sse", "ndjson", "whole"]
# What a streamed body's Content-Type holds, per framing, and that in words (the HTTP
# engines refuse a body that says otherwise)
CONTENT_TYPES: dict[Framing, tuple[str, str]] = {
    "sse": ("event-stream", "an event stream"),
    "ndjson": ("json", "NDJSON"),
    "whole": ("json", "a JSON object"),
}
MAX_COUNT = 2**53  # a token count at or past this is not a count
CUT_SHORT = "the stream ended before the server finished (the connection was closed mid-stream)"


def count(v: Any) -> int | None:
    """``v`` as a token count: a whole number 0 ≤ v < 2**53, else None."""
    return v if type(v) is int and 0 <= v < MAX_COUNT else None


def text_of(data: str | bytes) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def parse_object(data: str | bytes) -> dict[str, Any]:
    """One payload as a JSON object (StreamProtocolError when it is not one)."""
    try:
        obj = json_loads(data)
    except (ValueError, RecursionError):  # (json, without orjson: nested too deep)
        raise StreamProtocolError(f"malformed stream data: {text_of(data)[:120]!r}") from None
    if type(obj) is not dict:
        raise StreamProtocolError(f"stream data is not a JSON object: {text_of(data)[:120]!r}")
    return obj


class ToolCallText:
    """A tool call written as text while it streams: ``name(``, the arguments' pieces as
    they come, ``)`` when it ends (the next call starts, or the answer ends)."""

    __slots__ = ("open", "calls")

    def __init__(self) -> None:
        self.open = False
        self.calls = 0

    def start(self, name: str) -> str:
        head = (")\n" if self.open else "\n" if self.calls else "") + (name or "tool") + "("
        self.open = True
        self.calls += 1
        return head

    def close(self) -> str:
        if not self.open:
            return ""
        self.open = False
        return ")"


class StreamDecoder:
    """What one streamed answer has said so far (see the module docstring). A subclass
    reads one payload (:meth:`payload`); this class frames, counts and ends. ``framing``:
    its dialect's (:class:`~tui.engines.dialects.kinds.Dialect` makes decoders with it;
    a decoder that reads an answer whole is never fed, whatever its framing)."""

    def __init__(self, framing: Framing) -> None:
        frames: SSEDecoder | NDJSONDecoder = (
            NDJSONDecoder() if framing == "ndjson" else SSEDecoder()
        )
        self.framing = frames
        self._frames: Callable[[bytes], list[bytes] | list[str]] = (
            frames.feed_payloads if isinstance(frames, SSEDecoder) else frames.feed
        )
        self.complete = False  # the server said the answer is over
        self.finish_reason: FinishReason | None = None
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.reasoning_tokens: int | None = None
        self.cached_tokens: int | None = None
        self.response_model: str | None = None  # the model the answer names (first seen)
        self.usage_t_ns: int | None = None  # when the server's counts came
        self.last_t_ns: int | None = None  # the last payload's stamp
        # server-specific fields, by name (llama-server's timings: .fields's allow-list)
        self.extra: dict[str, Any] = {}
        self.think = ThinkSplitter()
        self.tools = ToolCallText()
        self.closed = False  # close() ran: the counts went out as Usage

    # --- what the framing gives -------------------------------------------------------
    @property
    def pending(self) -> int:
        """Bytes held of an unfinished event or line (the stall deadline's input)."""
        return self.framing.pending

    def feed(self, data: bytes, t_ns: int, emit: Emit) -> bool:
        """One read of the body, stamped ``t_ns``; True when it completed an event."""
        payloads = self._frames(data)
        if payloads:
            self.last_t_ns = t_ns
            for payload in payloads:
                self.payload(payload, t_ns, emit)
                if self.complete:
                    break
        return bool(payloads)

    def close(self, t_ns: int, emit: Emit) -> None:
        """The body ended (or was cut) at ``t_ns``: the event left unfinished, the text held
        back (a half tag), a tool call left open, then the server's counts as Usage."""
        framing = self.framing
        if isinstance(framing, SSEDecoder):
            rest: list[str | bytes] = [ev.data for ev in framing.close()]
        else:
            line = framing.close()
            rest = [line] if line else []
        for payload in rest:
            if self.complete:
                break
            self.last_t_ns = t_ns
            self.payload(payload, t_ns, emit)
        self.flush(self.last_t_ns or t_ns, emit)
        self.closed = True
        usage = self.usage_event()
        if usage is not None:
            emit(usage)

    def end(self, t_ns: int) -> StreamEvent:
        """The last event: Finished at the last payload, or Failed when the server never
        said the answer was over; either names the model the answer named, if it did."""
        if not self.complete and self.finish_reason is None:
            return Failed(t_ns, CUT_SHORT, "protocol", self.response_model)
        return Finished(self.last_t_ns or t_ns, self.finish_reason or "stop", self.response_model)

    # --- what a payload says ----------------------------------------------------------
    def payload(self, data: str | bytes, t_ns: int, emit: Emit) -> None:
        raise NotImplementedError

    def answer(self, t_ns: int, text: str, tokens: int | None, emit: Emit) -> None:
        """Answer text, through the ``<think>`` splitter (a model whose reasoning no
        parser took out writes it inside ``<think>…</think>``)."""
        if self.tools.open:
            emit(TextChunk(t_ns, self.tools.close(), 0, TOOL))
        if self.think.passing:
            emit(TextChunk(t_ns, text, tokens))
        else:
            self.think.split(t_ns, text, tokens, emit)

    def reasoning(self, t_ns: int, text: str, tokens: int | None, emit: Emit) -> None:
        if self.think.held:  # answer text held back came first: it goes first
            self.think.flush(t_ns, emit)
        emit(TextChunk(t_ns, text, tokens, REASONING))

    def tool_start(self, t_ns: int, name: str, tokens: int | None, emit: Emit) -> None:
        if self.think.held:
            self.think.flush(t_ns, emit)
        emit(TextChunk(t_ns, self.tools.start(name), tokens, TOOL))

    def tool_text(self, t_ns: int, text: str, tokens: int | None, emit: Emit) -> None:
        emit(TextChunk(t_ns, text, tokens, TOOL))

    def tool_end(self, t_ns: int, emit: Emit) -> None:
        if self.tools.open:
            emit(TextChunk(t_ns, self.tools.close(), 0, TOOL))

    def flush(self, t_ns: int, emit: Emit) -> None:
        """Text held back, and an open tool call's ``)``, at the end of the answer."""
        self.think.flush(t_ns, emit)
        self.tool_end(t_ns, emit)

    def take_timings(self, timings: Any) -> None:
        """llama-server's ``timings`` object, its documented numbers only (:mod:`.fields`)."""
        if type(timings) is dict:
            self.extra["timings"] = kept_numbers(timings, LLAMA_TIMINGS)

    def take_request_metrics(self, metrics: Any) -> None:
        """vLLM's per-request ``metrics``, its documented numbers only (:mod:`.fields`)."""
        if type(metrics) is not dict:
            return
        kept: dict[str, Any] = kept_numbers(metrics, VLLM_REQUEST)
        spec = metrics.get("speculative_decoding")
        if type(spec) is dict:
            kept["speculative_decoding"] = kept_numbers(spec, VLLM_SPECULATION)
        self.extra["metrics"] = kept

    def usage_event(self) -> Usage | None:
        """What the server counted, as a Usage event (None: it counted nothing)."""
        if self.prompt_tokens is None and self.output_tokens is None:
            if self.reasoning_tokens is None:
                return None
        return Usage(
            self.usage_t_ns or self.last_t_ns or time.perf_counter_ns(),
            self.prompt_tokens,
            self.output_tokens,
            self.reasoning_tokens,
        )


__all__ = [
    "ANSWER",
    "CONTENT_TYPES",
    "MODEL_CHARS",
    "CUT_SHORT",
    "Emit",
    "Framing",
    "StreamDecoder",
    "ToolCallText",
    "count",
    "json_loads",
    "model_name",
    "parse_object",
    "text_of",
]
