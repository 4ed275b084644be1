"""Rows 4, 5, 6 and 9 (status line): every reader of a server's bytes is linear and
bounded, and a hostile server costs at most its timeout.

Each test points a real engine (or the lean client's pool) at the hostile server over a
real socket. The bound asserted is the reader's own deadline (a stall timeout, the read
timeout, the size cap at loopback speed) with a wide margin for a busy machine; on main
each of these ran far past it (quadratic CPU, or no deadline at all).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.stream_check import collect
from tui.engines.base import EngineError, EngineSpec, GenerationRequest
from tui.engines.http.ollama import OllamaEngine
from tui.engines.http.openai_compat import OpenAICompatEngine
from tui.transport.http1 import Http1Pool
from tui.transport.http_io import HttpTimeouts

REQ = GenerationRequest.from_prompt("hi", max_tokens=8)
SLACK_S = 25.0  # a busy 2-core machine: far above each bound, far below "never"


def openai(url: str, **kw: object) -> OpenAICompatEngine:
    spec = EngineSpec(name="t", kind="openai", url=url, model="m", **kw)  # type: ignore[arg-type]
    return OpenAICompatEngine(spec)


def ollama(url: str, **kw: object) -> OllamaEngine:
    spec = EngineSpec(name="t", kind="ollama", url=url, model="m", **kw)  # type: ignore[arg-type]
    return OllamaEngine(spec)


async def _bounded(coro, limit_s: float):  # type: ignore[no-untyped-def]
    """``coro``'s result, and how long it took; fails when it runs past ``limit_s``."""
    t0 = time.monotonic()
    try:
        result = await asyncio.wait_for(coro, limit_s)
    except asyncio.TimeoutError:
        pytest.fail(f"still running after {limit_s:.0f} s: the reader is not bounded")
    return result, time.monotonic() - t0


# What a client that stops at a cap may still have let the server send: the cap, plus
# what the sockets' buffers and one read callback's drain hold (a few MiB on loopback).
# A client that reads on past its cap lets the server send its whole 512 MiB.
SENT_SLACK = 32 * 1024 * 1024


@pytest.mark.parametrize("make", [openai, ollama], ids=["sse", "ndjson"])
async def test_an_endless_line_is_refused_at_the_cap(hostile_bench, make) -> None:
    hostile, server = hostile_bench
    sent = server.sent["endless"]
    engine = make(f"{hostile}/endless")
    try:
        r, took = await _bounded(collect(engine, REQ), SLACK_S)
    finally:
        await engine.close()
    assert r.failed is not None and r.failed.kind == "protocol", r.failed
    assert "longer than 16777216 bytes" in r.failed.message
    await asyncio.sleep(0.5)  # the server notices the close
    assert server.sent["endless"] - sent < 16 * 1024 * 1024 + SENT_SLACK


@pytest.mark.parametrize("make", [openai, ollama], ids=["sse", "ndjson"])
async def test_a_dripped_event_ends_at_the_stall_timeout(hostile, make) -> None:
    engine = make(f"{hostile}/drip", read_timeout_s=2.0, stall_timeout_s=1.0)
    try:
        r, took = await _bounded(collect(engine, REQ), 1.0 + SLACK_S)
    finally:
        await engine.close()
    assert r.failed is not None and r.failed.kind == "timeout", r.failed
    assert "unfinished for over 1 s" in r.failed.message


@pytest.mark.parametrize("credentials", [False, True], ids=["lean", "httpx"])
async def test_a_huge_whole_body_is_refused_at_the_cap(hostile_bench, credentials) -> None:
    """/v1/models answering 1 GiB: the lean client (plain http://) and httpx (credentials
    in the URL send it there) both stop at the cap, in linear time, and read no further."""
    hostile, server = hostile_bench
    sent = server.sent["huge"]
    base = hostile.replace("http://", "http://u:p@") if credentials else hostile
    engine = openai(f"{base}/huge")
    try:
        with pytest.raises(EngineError, match="larger than 16777216 bytes"):
            await _bounded(engine.load(), SLACK_S)
    finally:
        await engine.close()
    await asyncio.sleep(0.5)
    assert server.sent["huge"] - sent < 16 * 1024 * 1024 + SENT_SLACK


@pytest.mark.parametrize("mode", ["drip", "drip-head"])
@pytest.mark.parametrize("credentials", [False, True], ids=["lean", "httpx"])
async def test_a_dripped_whole_answer_ends_at_its_deadline(hostile, mode, credentials) -> None:
    """connect 1 s + read 2 s: the whole answer's deadline is 3 s, though a byte comes
    every 50 ms (no per-read timeout ever fires)."""
    base = hostile.replace("http://", "http://u:p@") if credentials else hostile
    engine = openai(f"{base}/{mode}", connect_timeout_s=1.0, read_timeout_s=2.0)
    try:
        with pytest.raises(EngineError, match="within the read timeout"):
            await _bounded(engine.load(), 3.0 + SLACK_S)
    finally:
        await engine.close()


async def test_a_pooled_connection_keeps_nothing_sent_after_its_response(hostile_bench) -> None:
    hostile, server = hostile_bench
    pool = Http1Pool({}, HttpTimeouts(2.0, 5.0, 5.0))
    resp = await pool.request("GET", f"{hostile}/after/v1/models")
    assert resp.status_code == 200 and await resp.read_all(pool.timeouts, 1 << 20)
    await resp.aclose()  # kept alive: into the pool
    (conn,) = pool._idle[("127.0.0.1", int(hostile.rsplit(":", 1)[1]))]
    await asyncio.sleep(1.5)  # the server sends 64 MiB nobody asked for
    held = sum(len(data) for _, data in conn.parts)
    assert held == 0 and conn.closed, f"{held} bytes kept from after the response"
    again = await pool.request("GET", f"{hostile}/after/v1/models")  # a fresh connection
    assert again.status_code == 200
    await again.aclose()
    pool.close()


async def test_a_status_line_with_unicode_digits_is_a_protocol_error(hostile) -> None:
    engine = openai(f"{hostile}/status-super")
    try:
        r, _ = await _bounded(collect(engine, REQ), SLACK_S)
    finally:
        await engine.close()
    assert r.failed is not None and r.failed.kind == "protocol", r.failed
    assert "illegal status line" in r.failed.message


async def test_json_nested_deep_is_a_clear_failure(hostile) -> None:
    """/v1/models and a 200 answer of the wrong type whose JSON is ``[`` x 100,000."""
    engine = openai(f"{hostile}/prom-deep")
    try:
        with pytest.raises(EngineError, match="did not return JSON"):
            await _bounded(engine.load(), SLACK_S)
        r, _ = await _bounded(collect(engine, REQ), SLACK_S)
    finally:
        await engine.close()
    assert r.failed is not None and r.failed.kind == "protocol", r.failed
    assert "not an event stream" in r.failed.message


@pytest.mark.timing  # the 0.5 s stall timeout, not the 20 s read timeout: 10 s is room for load
async def test_the_stall_timeout_holds_when_the_first_bytes_wait_in_the_connection(
    hostile,
) -> None:
    """The head, then one event that arrives (and waits in the connection) before the
    body is read, then silence: the wait after it is the stall timeout (0.5 s), not the
    read timeout (20 s) as on main (a 5 s stall in a loaded run of
    tests/http/test_openai_faults.py pointed at it)."""
    from tui.transport.http_io import StallTimeout

    pool = Http1Pool({}, HttpTimeouts(2.0, 20.0, 0.5))
    try:
        resp = await pool.post(f"{hostile}/stall-later/v1/chat/completions", b"{}", "text/x")
        await asyncio.sleep(0.6)  # the event comes 0.2 s after the head: read, not taken
        got: list[bytes] = []
        t0 = time.monotonic()
        with pytest.raises(StallTimeout):
            await resp.push_body(pool.timeouts, lambda t_ns, data: got.append(data) or False)
        assert time.monotonic() - t0 < 10.0  # 0.5 s, with room for a busy machine
        assert got and b"Hello" in got[0]
        await resp.aclose()
    finally:
        pool.close()


def test_a_servers_json_error_message_is_one_bounded_line() -> None:
    """A 60 KiB JSON error message (or one of many lines) is kept as one line of 300."""
    import json

    from tui.transport.http_io import ERROR_MESSAGE_CHARS, error_message_from_body

    huge = json.dumps({"error": {"message": "overloaded\n" + "x" * 60_000}}).encode()
    msg = error_message_from_body(huge, "application/json")
    assert msg.startswith("overloaded x") and len(msg) == ERROR_MESSAGE_CHARS
    plain = error_message_from_body(b"busy\r\n\r\n" + b"y" * 60_000, "text/plain")
    assert plain.startswith("busy y") and len(plain) == ERROR_MESSAGE_CHARS
    assert error_message_from_body(b'{"error": {"message": "  "}}', "json") == (
        '{"error": {"message": " "}}'
    )
