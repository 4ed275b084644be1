"""Trace context for the proxy's requests (tui/core/trace_context.py): what it does with
a request's ``traceparent``, by its mode.

- ``off`` (no export, no propagation): nothing; not a byte read or changed.
- ``record`` (OTLP export on): each generation request gets a context — the client's
  trace continued when it sent a valid ``traceparent``, else a new one — for its span.
  The request goes upstream unchanged.
- ``propagate`` (``--trace-propagation``): as ``record``, and the request goes upstream
  with ``traceparent`` naming infertop's span (a client's own ``traceparent`` replaced by
  it: the trace is the client's, the parent now infertop's span), so the engine's span
  lands under infertop's. Such a request takes the strict path (its head is rewritten),
  not the plain one (tui/proxy/plain_head.py sends the client's head as it came).
"""

from __future__ import annotations

from typing import Final

from tui.core.trace_context import TRACEPARENT, TraceContext, TraceMode, continue_or_start
from tui.transport.http_head import RequestHead

TRACEPARENT_FIELD: Final = TRACEPARENT.encode()


def trace_for(mode: TraceMode, head: RequestHead) -> TraceContext | None:
    """The trace context of a generation request (None when ``mode`` is off)."""
    if mode == "off":
        return None
    return continue_or_start(head.get(TRACEPARENT_FIELD))


def traceparent_field(mode: TraceMode, trace: TraceContext | None) -> bytes | None:
    """The ``traceparent`` value to send upstream (None: send the request as it came)."""
    if mode != "propagate" or trace is None:
        return None
    return trace.traceparent().encode("latin-1")
