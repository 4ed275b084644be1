"""Answers whose engine fields attack what a client keeps of them (issue 48, items 1, 3
and 5), as OpenAI chat streams (SSE bodies, no HTTP head). Standard library only.

- :func:`inflated_counts`: a two-character answer whose continuous usage says the second
  chunk carried ``tokens`` − 1 tokens (vLLM's per-chunk counts, inflated);
- :func:`blank_lead`: ``size`` characters of spaces in ``piece``-character chunks, then a
  ``<think>`` block and an answer (a splitter that re-reads what it holds is quadratic);
- :func:`fat_fields`: a short answer whose last chunk carries llama-server ``timings`` of
  ``keys`` numeric keys beside its documented ones, a finish reason of ``reason_chars``
  characters, and an extra field of the same size;
- :func:`hostile_model`: "hi" from a server whose every chunk names a model of terminal
  control sequences and ``size`` more characters (the answer's ``model`` field).
"""

from __future__ import annotations

import json

DOCUMENTED_TIMINGS = {
    "prompt_n": 3,
    "prompt_ms": 1.5,
    "prompt_per_token_ms": 0.5,
    "prompt_per_second": 2000.0,
    "predicted_n": 2,
    "predicted_ms": 2.0,
    "predicted_per_token_ms": 1.0,
    "predicted_per_second": 500.0,
    "cache_n": 1,
    "draft_n": 4,
    "draft_n_accepted": 3,
}


def sse(obj: object) -> bytes:
    data = obj if isinstance(obj, bytes) else json.dumps(obj, separators=(",", ":")).encode()
    return b"data: " + data + b"\n\n"


def _delta(text: str, finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


def inflated_counts(tokens: int) -> list[bytes]:
    """The events (one SSE event each) of "hi" whose usage jumps from 1 to ``tokens``."""
    usage = {"prompt_tokens": 3, "completion_tokens": tokens}
    return [
        sse({**_delta("h"), "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
        sse({**_delta("i", "stop"), "usage": usage}),
        sse({"choices": [], "usage": usage}),
        sse(b"[DONE]"),
    ]


def blank_lead(size: int, piece: int) -> list[bytes]:
    """``size`` spaces in chunks of ``piece``, then ``<think>r</think>a``: one event each."""
    blank = sse(_delta(" " * piece))
    tail = [sse(_delta("<think>r</think>a", "stop")), sse(b"[DONE]")]
    return [blank] * (size // piece) + tail


def fat_fields(keys: int, reason_chars: int) -> list[bytes]:
    """ "hi", then a last chunk with ``keys`` extra timings keys (``"0": 0, "1": 1, ...``:
    a million of them and the rest fit one 16 MiB event), a finish reason and an unknown
    field of ``reason_chars`` characters each, usage."""
    extra = ",".join(f'"{i}":{i}' for i in range(keys))
    documented = json.dumps(DOCUMENTED_TIMINGS, separators=(",", ":"))[1:-1]
    reason, fingerprint = "s" * reason_chars, "f" * reason_chars
    last = (
        f'{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{reason}"}}],'
        f'"timings":{{{extra},{documented}}},"system_fingerprint":"{fingerprint}",'
        '"usage":{"prompt_tokens":3,"completion_tokens":2}}'
    )
    return [sse(_delta("hi")), sse(last.encode()), sse(b"[DONE]")]


# What a hostile model name starts with: an OSC 52 clipboard write, a screen clear, a
# C1 CSI, a BEL, a NUL, a bare CR, a DEL
HOSTILE_MODEL_HEAD = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m\x07\x00\rX\x7f"


def hostile_model(size: int) -> list[bytes]:
    """ "hi" whose chunks name the model :data:`HOSTILE_MODEL_HEAD` + ``size`` "M"s
    (JSON-escaped on the wire, as a server must: raw controls are not JSON)."""
    model = HOSTILE_MODEL_HEAD + "M" * size
    usage = {"prompt_tokens": 3, "completion_tokens": 2}
    return [
        sse({**_delta("h"), "model": model}),
        sse({**_delta("i", "stop"), "model": model}),
        sse({"choices": [], "usage": usage, "model": model}),
        sse(b"[DONE]"),
    ]
