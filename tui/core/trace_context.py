"""W3C Trace Context: the ids a request's span is known by, and its ``traceparent``.

infertop's span of a request (the proxy's, the chat's, the bench's) has a trace id and a
span id of its own. A request that came with a valid ``traceparent`` continues that
trace: same trace id, the client's span as the parent (so a client's own span and
infertop's are one trace). Otherwise a new trace begins. With trace propagation on, the
request sent to the engine carries ``traceparent: 00-<trace id>-<infertop's span id>-
<flags>``, so the engine's span (vLLM's ``llm_request``) lands under infertop's.

:func:`parse_traceparent` reads a client's header strictly (W3C Trace Context level 1,
section 3.2): it is a client's text, so anything not exactly that shape is no context
(a new trace begins; the bad header is passed on as it came, unread).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Final, Literal

# What a measuring place does with trace context: nothing; a context for each request's
# span (OTLP export on), the request unchanged; that, and ``traceparent`` sent with it.
TraceMode = Literal["off", "record", "propagate"]
TRACE_MODES: Final[tuple[TraceMode, ...]] = ("off", "record", "propagate")
TRACEPARENT: Final = "traceparent"
MAX_HEADER: Final = 256  # longer than any traceparent a version may make; past it: none
_HEX32 = re.compile(r"[0-9a-f]{32}")
_VERSION00 = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
# a later version: its first four fields as version 00's, then "-" and more, or the end
_LATER = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_rand = random.SystemRandom()


@dataclass(frozen=True, slots=True)
class TraceContext:
    """One request's place in a trace: its ``trace_id`` (32 lower-case hex digits),
    infertop's ``span_id`` for it (16), the client's span it continues (``parent_id``,
    None for a new trace) and whether the trace is sampled (the client's flag, else
    True)."""

    trace_id: str
    span_id: str
    parent_id: str | None = None
    sampled: bool = True

    def traceparent(self) -> str:
        """The header value that makes infertop's span the parent of what follows."""
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"


def new_span_id() -> str:
    while True:
        value = f"{_rand.getrandbits(64):016x}"
        if value != _ZERO_SPAN:
            return value


def new_trace_id() -> str:
    while True:
        value = f"{_rand.getrandbits(128):032x}"
        if value != _ZERO_TRACE:
            return value


def parse_traceparent(value: str | bytes | None) -> tuple[str, str, bool] | None:
    """(trace id, parent span id, sampled) of a ``traceparent`` value, or None when it is
    absent or not valid (an all-zero id, version ff, upper-case hex, a version 00 value
    with anything after its flags, longer than :data:`MAX_HEADER`)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        if len(value) > MAX_HEADER:
            return None
        value = value.decode("latin-1")
    if len(value) > MAX_HEADER:
        return None
    value = value.strip(" \t")
    m = _VERSION00.fullmatch(value)
    if m is not None:
        trace, parent, flags = m.group(1), m.group(2), m.group(3)
    else:
        later = _LATER.fullmatch(value)
        if later is None or later.group(1) in ("00", "ff"):
            return None
        trace, parent, flags = later.group(2), later.group(3), later.group(4)
    if trace == _ZERO_TRACE or parent == _ZERO_SPAN:
        return None
    return trace, parent, bool(int(flags, 16) & 1)


def continue_or_start(incoming: str | bytes | None) -> TraceContext:
    """A context for one request: continuing ``incoming`` (a client's ``traceparent``)
    when it is valid, else a new trace; infertop's span id is always new."""
    parsed = parse_traceparent(incoming)
    if parsed is None:
        return TraceContext(new_trace_id(), new_span_id())
    trace, parent, sampled = parsed
    return TraceContext(trace, new_span_id(), parent, sampled)


def is_trace_id(value: str) -> bool:
    """Whether ``value`` is a trace id as :class:`TraceContext` holds one."""
    return bool(_HEX32.fullmatch(value)) and value != _ZERO_TRACE
