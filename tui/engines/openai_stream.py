"""What an OpenAI-compatible stream says, payload by payload: :class:`OpenAIStreamState`.

Each SSE ``data`` payload of /v1/chat/completions or /v1/completions is parsed into at
most one TextChunk (a role-only or empty chunk is none: not a token); usage, finish
reason and server-specific fields (``timings``, ``x_groq``, ``system_fingerprint``) are
kept in the state. Per-chunk token counts are given only when the server counts every
chunk (continuous usage); otherwise the chunk carries None and metrics say "estimate".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tui.core.events import TextChunk, Usage
from tui.engines.stream_errors import StreamProtocolError, StreamServerError
from tui.transport.http_io import error_message_from_body

try:  # orjson parses a stream chunk ~3x faster than json (issue 5: client CPU per token)
    from orjson import loads as json_loads
except ImportError:  # pragma: no cover - a dependency; json gives the same objects
    from json import loads as json_loads  # type: ignore[assignment]


@dataclass
class OpenAIStreamState:
    """What one streamed response has said so far."""

    endpoint: str
    done: bool = False  # saw data: [DONE]
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    usage_t_ns: int | None = None
    last_t_ns: int | None = None
    counted_tokens: int = 0  # running completion_tokens (continuous usage)
    extra: dict[str, Any] = field(default_factory=dict)  # server-specific fields

    def on_data(self, data: str | bytes, t_ns: int) -> TextChunk | None:
        """The text chunk carried by one SSE ``data`` payload (text, or UTF-8 bytes) that
        arrived at ``t_ns``, if it carries text; the rest of what it says goes into this
        state."""
        self.last_t_ns = t_ns
        try:
            obj = json_loads(data)
        except (ValueError, RecursionError):  # (json, without orjson: nested too deep)
            if isinstance(data, bytes):  # as text: invalid UTF-8 becomes U+FFFD
                return self.on_data(data.decode("utf-8", "replace"), t_ns)
            if data.strip() == "[DONE]":
                self.done = True
                return None
            raise StreamProtocolError(f"malformed stream data: {data[:120]!r}") from None
        if not isinstance(obj, dict):
            raise StreamProtocolError(f"stream data is not a JSON object: {_text(data)[:120]!r}")
        get = obj.get
        if get("error"):
            raw = data if isinstance(data, bytes) else data.encode()
            raise StreamServerError(error_message_from_body(raw, "json"))
        usage = get("usage")
        tokens: int | None = None
        if isinstance(usage, dict):
            self.usage = usage
            self.usage_t_ns = t_ns
            ct = usage.get("completion_tokens")
            if isinstance(ct, int):
                tokens = ct - self.counted_tokens
                self.counted_tokens = ct
        if not _EXTRA_KEYS.isdisjoint(obj):
            for key in _EXTRA_KEYS & obj.keys():
                self.extra[key] = obj[key]
        choices = get("choices")
        if not choices:
            return None
        if type(choices) is not list:
            raise StreamProtocolError(f"'choices' is not a list: {_text(data)[:120]!r}")
        text = ""
        completions = self.endpoint == "completions"
        for ch in choices:
            if type(ch) is not dict:
                continue
            if completions:
                t = ch.get("text")
                if t and type(t) is str:
                    text += t
            else:
                text += _chat_text(ch)
            reason = ch.get("finish_reason")
            if reason:
                self.finish_reason = str(reason)
        if text:
            # Per-chunk counts only when the server counts every chunk (continuous usage).
            return TextChunk(t_ns, text, tokens if tokens is not None and tokens > 0 else None)
        return None


_EXTRA_KEYS = frozenset(("timings", "x_groq", "system_fingerprint"))  # server-specific, kept


def _text(data: str | bytes) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _chat_text(ch: dict[str, Any]) -> str:
    delta = ch.get("delta") or {}
    if not isinstance(delta, dict):
        return ""
    parts = []
    for key in ("reasoning_content", "reasoning", "content"):
        v = delta.get(key)
        if isinstance(v, str) and v:
            parts.append(v)
    return "".join(parts)


def usage_event(state: OpenAIStreamState) -> Usage:
    """The Usage event of what the server counted (None where it did not)."""
    u = state.usage or {}
    pt, ct = u.get("prompt_tokens"), u.get("completion_tokens")
    return Usage(
        state.usage_t_ns or time.perf_counter_ns(),
        pt if isinstance(pt, int) else None,
        ct if isinstance(ct, int) else None,
    )
