"""What a session record must hold before it is replayed: types and finite numbers.

A session file may come from someone else. ``json.loads`` takes ``NaN``, numbers of any
size and any shape; the replay engine then does arithmetic on the times and token counts
it finds. :func:`record_problem` checks, field by field, what the replay reads (the
timeline's chunks and times, token counts, the engine's report, the labels) and says in
a few words what is wrong, so the reader can skip the line and name it.
"""

from __future__ import annotations

import math
from typing import Any

from tui.core.events import PARTS, TRUTH_NUMBERS

MAX_NS = 10**15  # ~11.6 days: a recorded time past this is no request's
_TEXT_FIELDS = ("finish_reason", "error", "error_kind", "stamp_source", "response_model")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_NS


def _time_problem(name: str, x: Any) -> str | None:
    if x is None:
        return None
    if not _is_number(x) or not -MAX_NS <= x <= MAX_NS:
        return f"{name} is not a time in ns ({str(x)[:40]})"
    return None


def record_problem(rec: Any) -> str | None:
    """None when ``rec`` is a session record the replay can use, else what is wrong."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    tl = rec.get("timeline")
    if not isinstance(tl, dict):
        return "no timeline object"
    for key in ("prompt", "engine", "model"):
        if key in rec and not isinstance(rec[key], str):
            return f"{key} is not a string"
    chunks = tl.get("chunks", [])
    if not isinstance(chunks, list):
        return "timeline.chunks is not a list"
    for i, chunk in enumerate(chunks):
        if not (isinstance(chunk, list) and len(chunk) in (3, 4)):
            return f"chunk {i} is not [time, text, tokens] or [time, text, tokens, part]"
        t, text, tokens = chunk[:3]
        if len(chunk) == 4 and chunk[3] not in PARTS:
            return f"chunk {i}'s part is not one of {', '.join(PARTS)}"
        if not (_is_number(t) and 0 <= t <= MAX_NS):
            return f"chunk {i}'s time is not a time in ns >= 0 ({str(t)[:40]})"
        if not isinstance(text, str):
            return f"chunk {i}'s text is not a string"
        if tokens is not None and not _is_count(tokens):
            return f"chunk {i}'s token count is not a whole number >= 0"
    for key in ("t_first_byte_ns", "t_end_ns"):
        why = _time_problem(f"timeline.{key}", tl.get(key))
        if why:
            return why
    for key in ("prompt_tokens", "usage_output_tokens", "usage_reasoning_tokens"):
        if tl.get(key) is not None and not _is_count(tl[key]):
            return f"timeline.{key} is not a whole number >= 0"
    for key in _TEXT_FIELDS:
        if tl.get(key) is not None and not isinstance(tl[key], str):
            return f"timeline.{key} is not a string"
    truth = rec.get("engine_truth")
    if truth is not None:
        if not isinstance(truth, dict):
            return "engine_truth is not an object"
        for key in TRUTH_NUMBERS:
            value = truth.get(key)
            if value is not None and not (_is_number(value) and abs(value) <= MAX_NS):
                return f"engine_truth.{key} is not a finite number"
        if truth.get("source") is not None and not isinstance(truth["source"], str):
            return "engine_truth.source is not a string"
    return None
