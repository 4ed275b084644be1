"""Trace context through the proxy (tui/proxy/tracing.py): off changes no byte and
reads nothing; record gives each generation request a context and changes no byte;
propagate sends ``traceparent`` naming infertop's span, continuing a client's own
trace, and a hostile ``traceparent`` starts a new trace instead."""

from __future__ import annotations

import pytest

from tests.proxy.proxy_support import raw_exchange
from tests.proxy.test_forward import SSE, as_forwarded
from tests.support.scripted_upstream import ScriptedUpstream, chunked, sse_head
from tui.core.trace_context import parse_traceparent

REQUEST = (
    b"POST /v1/chat/completions?trace=1 HTTP/1.1\r\nHost: proxy\r\nUser-Agent: test/1\r\n"
    b"Authorization: Bearer sk-secret\r\nX-Custom: Mixed Case\r\nContent-Type: application/json\r\n"
    b'Content-Length: 27\r\n\r\n{"model":"m","stream":true}'
)
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01".encode()


def _with(header: bytes) -> bytes:
    return REQUEST.replace(b"User-Agent: test/1\r\n", b"User-Agent: test/1\r\n" + header, 1)


def traceparents(raw: bytes) -> list[bytes]:
    """The values of every traceparent field of a raw request's head."""
    lines = raw.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]
    return [
        v.strip() for k, _, v in (ln.partition(b":") for ln in lines) if k.lower() == b"traceparent"
    ]


def _run(start_proxy, trace: str, request: bytes) -> tuple[bytes, object]:
    up = ScriptedUpstream(lambda _req: [(0, sse_head()), (0, chunked(*SSE))])
    try:
        proxy = start_proxy(up.url, trace=trace)
        raw_exchange(
            proxy.url, request.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n", 1)
        )
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        got = up.requests[0]
        expected = as_forwarded(up)
    finally:
        up.stop()
    return got, (rec, expected)


@pytest.mark.parametrize("trace", ["off", "record"])
def test_without_propagation_the_request_goes_on_unchanged(start_proxy, trace) -> None:
    got, (rec, expected) = _run(start_proxy, trace, REQUEST)
    assert got == expected
    if trace == "off":
        assert rec.trace is None and rec.row().trace_id is None
    else:  # a new trace, for its span
        assert rec.trace.parent_id is None and rec.row().trace_id == rec.trace.trace_id
    # a client's own traceparent passes as it came, and (record) its trace is continued
    got, (rec, _) = _run(start_proxy, trace, _with(b"traceparent: " + TRACEPARENT + b"\r\n"))
    assert b"traceparent: " + TRACEPARENT + b"\r\n" in got
    if trace == "record":
        assert (rec.trace.trace_id, rec.trace.parent_id) == (CLIENT_TRACE, CLIENT_SPAN)


def test_propagation_sends_infertops_span_as_the_parent(start_proxy) -> None:
    got, (rec, expected) = _run(start_proxy, "propagate", REQUEST)
    fields = traceparents(got)
    assert len(fields) == 1
    assert parse_traceparent(fields[0]) == (rec.trace.trace_id, rec.trace.span_id, True)
    # everything else as before: only the traceparent line was added
    assert got.replace(b"traceparent: " + fields[0] + b"\r\n", b"") == expected


def test_propagation_continues_a_clients_trace(start_proxy) -> None:
    got, (rec, _) = _run(start_proxy, "propagate", _with(b"traceparent: " + TRACEPARENT + b"\r\n"))
    fields = traceparents(got)
    assert len(fields) == 1  # the client's was replaced, not repeated
    assert parse_traceparent(fields[0]) == (CLIENT_TRACE, rec.trace.span_id, True)
    assert rec.trace.parent_id == CLIENT_SPAN and rec.trace.span_id != CLIENT_SPAN


@pytest.mark.parametrize(
    "bad",
    [
        b"00-" + b"0" * 32 + b"-00f067aa0ba902b7-01",  # all-zero trace id
        b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        b"x" * 2000,
    ],
)
def test_a_hostile_traceparent_starts_a_new_trace(start_proxy, bad) -> None:
    got, (rec, _) = _run(start_proxy, "propagate", _with(b"traceparent: " + bad + b"\r\n"))
    assert rec.trace.parent_id is None and rec.trace.trace_id != CLIENT_TRACE
    assert traceparents(got) == [rec.trace.traceparent().encode()]
