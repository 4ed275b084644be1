"""W3C traceparent: read strictly (a client's text), written as version 00, new ids
never all zero; a context continues a valid incoming trace and starts one otherwise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.core.trace_context import (
    MAX_HEADER,
    continue_or_start,
    is_trace_id,
    parse_traceparent,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def test_the_specs_example_parses() -> None:
    assert parse_traceparent(f"00-{TRACE}-{SPAN}-01") == (TRACE, SPAN, True)
    assert parse_traceparent(f"00-{TRACE}-{SPAN}-00".encode()) == (TRACE, SPAN, False)
    assert parse_traceparent(f" 00-{TRACE}-{SPAN}-09\t") == (TRACE, SPAN, True)  # OWS; a flag


def test_a_later_version_is_read_by_its_first_fields() -> None:
    assert parse_traceparent(f"cc-{TRACE}-{SPAN}-01-what-the-future-has") == (TRACE, SPAN, True)
    assert parse_traceparent(f"cc-{TRACE}-{SPAN}-01") == (TRACE, SPAN, True)


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "",
        f"00-{'0' * 32}-{SPAN}-01",
        f"00-{TRACE}-{'0' * 16}-01",
        f"ff-{TRACE}-{SPAN}-01",
        f"00-{TRACE.upper()}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}-01-more",  # version 00 has nothing after the flags
        f"00-{TRACE}-{SPAN}",
        f"00_{TRACE}_{SPAN}_01",
        f"0-{TRACE}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}-1",
        f"cc-{TRACE}-{SPAN}-01x",
        f"00-{TRACE}-{SPAN}-01" + " " * MAX_HEADER,
        "\x00" * 55,
        f"00-{TRACE}\n-{SPAN}-01",
    ],
)
def test_anything_else_is_no_context(bad) -> None:
    assert parse_traceparent(bad) is None


@given(st.binary(max_size=400))
def test_any_bytes_parse_or_not_without_raising(data: bytes) -> None:
    got = parse_traceparent(data)
    if got is not None:
        assert is_trace_id(got[0]) and len(got[1]) == 16


def test_a_context_continues_a_trace_or_starts_one() -> None:
    ctx = continue_or_start(f"00-{TRACE}-{SPAN}-01")
    assert (ctx.trace_id, ctx.parent_id, ctx.sampled) == (TRACE, SPAN, True)
    assert ctx.span_id != SPAN and len(ctx.span_id) == 16
    assert ctx.traceparent() == f"00-{TRACE}-{ctx.span_id}-01"
    unsampled = continue_or_start(f"00-{TRACE}-{SPAN}-00")
    assert unsampled.traceparent().endswith("-00")  # the client's decision passes on
    fresh = continue_or_start(b"garbage")
    assert fresh.parent_id is None and is_trace_id(fresh.trace_id)
    assert parse_traceparent(fresh.traceparent()) == (fresh.trace_id, fresh.span_id, True)
    assert len({continue_or_start(None).trace_id for _ in range(200)}) == 200
