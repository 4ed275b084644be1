"""A made-up wire format for the tests: what adding a dialect takes — one decoder class
and one :class:`~tui.engines.dialects.kinds.Dialect` entry, nothing else.

``test-lines`` answers are NDJSON: ``{"say": "text"}`` per piece of the answer (one
token each), ``{"think": "text"}`` for reasoning, and a last ``{"end": N}`` giving the
output's token count; an answer read whole is one object ``{"say": ..., "end": N}``.
POST ``/v1/lines`` (or ``/lines``) is its route; a request streams unless it says not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from tui.engines.dialects.base import Emit, StreamDecoder, count, parse_object
from tui.engines.dialects.kinds import Dialect, DialectName, register, unregister


class LinesDecoder(StreamDecoder):
    """One ``test-lines`` answer (see the module docstring)."""

    def payload(self, data: str | bytes, t_ns: int, emit: Emit) -> None:
        obj = parse_object(data)
        if type(obj.get("think")) is str:
            self.reasoning(t_ns, obj["think"], 1, emit)
        if type(obj.get("say")) is str:
            self.answer(t_ns, obj["say"], 1, emit)
        if "end" in obj:
            self.complete = True
            self.finish_reason = "stop"
            self.output_tokens = count(obj["end"])
            self.usage_t_ns = t_ns


def read_lines(obj: dict[str, Any], t_ns: int, emit: Emit) -> StreamDecoder:
    dec = LinesDecoder("whole")
    dec.payload(json.dumps(obj), t_ns, emit)
    return dec


LINES = Dialect(
    cast(DialectName, "test-lines"),
    "ndjson",
    LinesDecoder,
    read_lines,
    ("/v1/lines", "/lines"),
    streamed_by_default=True,
)


@contextmanager
def lines_dialect() -> Iterator[Dialect]:
    """``test-lines`` registered while the block runs."""
    register(LINES)
    try:
        yield LINES
    finally:
        unregister(LINES.name)
