"""What of an engine's own fields is kept with a request: allow-lists and string bounds.

A server's answer may carry any field of any size. What a decoder keeps beyond the
stream's events — the engine's report (:class:`~tui.core.events.EngineTruth`'s ``raw``),
its finish reason, its error text — is kept with the request's record (the proxy's recent
requests, a session log, a bench report, the proxy's ``--events`` lines), so it is
chosen by name and bounded, never copied whole:

- llama-server's ``timings``: :data:`LLAMA_TIMINGS`, its documented numbers (finite
  numbers only);
- vLLM's per-request ``metrics``: :data:`VLLM_REQUEST` and, of its
  ``speculative_decoding``, :data:`VLLM_SPECULATION` (numbers only);
- Ollama's last line: :data:`OLLAMA_FINAL`, its durations and counts (numbers only: no
  text of the request, ``response``/``thinking``/``context``, ever reaches a record);
- OpenAI's and vLLM's ``usage`` (and the Responses API's, Anthropic's): read field by
  field as whole-number counts (prompt, completion, ``reasoning_tokens``,
  ``cached_tokens``, Anthropic's cache reads and writes), never kept as sent;
- every other field of a payload: read where a decoder needs it, kept nowhere.

Strings: an engine's word (a finish reason, a stop type) is cut to :data:`WORD_CHARS`
characters, an engine's error message to :data:`MESSAGE_CHARS` (:func:`engine_word`,
which tui/core/events.py owns since Finished.reason is typed by it, and
:func:`engine_message`); a value that is not text stands as its type's name.
"""

from __future__ import annotations

import math
from typing import Any, Final

# an engine's word, bounded where core types it (Finished.reason)
from tui.core.events import WORD_CHARS as WORD_CHARS
from tui.core.events import engine_word as engine_word

# llama-server's documented `timings` (tools/server/README.md): prefill, decode, the
# prompt cache and speculative decoding
LLAMA_TIMINGS: Final = (
    "prompt_n",
    "prompt_ms",
    "prompt_per_token_ms",
    "prompt_per_second",
    "predicted_n",
    "predicted_ms",
    "predicted_per_token_ms",
    "predicted_per_second",
    "cache_n",
    "draft_n",
    "draft_n_accepted",
)
# vLLM's per-request account, the answer's `metrics` (--enable-per-request-metrics;
# entrypoints/generate/base/protocol.py PerRequestMetrics), and its speculation part
VLLM_REQUEST: Final = (
    "queue_time_ms",
    "time_to_first_token_ms",
    "generation_time_ms",
    "mean_itl_ms",
    "tokens_per_second",
)
VLLM_SPECULATION: Final = (
    "num_draft_tokens",
    "num_accepted_draft_tokens",
    "num_spec_steps",
    "num_spec_tokens",
    "mean_acceptance_length",
    "draft_acceptance_rate",
)
# Ollama's account on its `done` line (nanoseconds and counts; docs/api.md)
OLLAMA_FINAL: Final = (
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
)
MESSAGE_CHARS: Final = 300  # an engine's error message
NUMBER_LIMIT: Final = 2**63  # a kept number at or past this (in size) is not kept


def kept_numbers(obj: dict[str, Any], names: tuple[str, ...]) -> dict[str, int | float]:
    """The fields of ``obj`` named in ``names`` that are finite numbers (never a bool),
    in the order of ``names``: at most ``len(names)`` small values, however big ``obj``."""
    out: dict[str, int | float] = {}
    for name in names:
        v = obj.get(name)
        if type(v) is int and -NUMBER_LIMIT < v < NUMBER_LIMIT:
            out[name] = v
        elif type(v) is float and math.isfinite(v) and abs(v) < NUMBER_LIMIT:
            out[name] = v
    return out


def _bounded(v: Any, limit: int) -> str:
    if type(v) is str:
        return v[:limit]
    if type(v) in (int, float, bool):
        return str(v)[:limit]
    return type(v).__name__  # a list or an object: its kind, not its contents


def engine_message(v: Any) -> str:
    """An engine's error text as kept: at most :data:`MESSAGE_CHARS` characters."""
    return _bounded(v, MESSAGE_CHARS)
