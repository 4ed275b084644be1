"""Message heads as the proxy parses and writes them: strict, bounded, hop-by-hop out.

Hostile input: any bytes give a head or BadMessage, nothing else (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.proxy.wire import client_response, end_to_end, upstream_request
from tui.transport.http_framing import Chunked, Framing
from tui.transport.http_head import (
    MAX_HEADERS,
    BadMessage,
    ResponseHead,
    framing_for,
    parse_request_head,
    parse_response_head,
)


def test_a_request_head_keeps_its_fields_as_they_came() -> None:
    head = parse_request_head(
        b"POST /v1/chat/completions?key=s3cret HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer sk-1\r\nX-Mixed-Case: A  b \r\nContent-Length: 12"
    )
    assert (head.method, head.target, head.path) == (
        "POST",
        "/v1/chat/completions?key=s3cret",
        "/v1/chat/completions",
    )
    assert head.headers[2] == (b"X-Mixed-Case", b"A  b")
    assert head.content_length == 12 and not head.chunked and head.keep_alive


@pytest.mark.parametrize(
    "raw, why",
    [
        (b"GET / HTTP/1.1 extra", "request line"),
        (b"get / HTTP/1.1", "method"),
        (b"GET http://evil/ HTTP/1.1", "not a path"),
        (b"GET /a\x01b HTTP/1.1", "not a path"),
        (b"GET / HTTP/2.0", "version"),
        (b"GET / HTTP/1.1\r\n folded: yes", "folded"),
        (b"GET / HTTP/1.1\r\nBad Name: x", "header line"),
        (b"GET / HTTP/1.1\r\nX: a\x00b", "control"),
        (b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked", "smuggling"),
        (b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6", "conflicting"),
        (b"POST / HTTP/1.1\r\nContent-Length: -5", "Content-Length"),
        (b"POST / HTTP/1.1\r\nContent-Length: 1_0", "Content-Length"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked", "Transfer-Encoding"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip", "Transfer-Encoding"),
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked", "HTTP/1.0"),
    ],
)
def test_a_bad_request_head_is_refused_with_why(raw: bytes, why: str) -> None:
    with pytest.raises(BadMessage, match=why):
        parse_request_head(raw)


def test_too_many_fields_are_refused() -> None:
    raw = b"GET / HTTP/1.1" + b"".join(b"\r\nX-%d: 1" % i for i in range(MAX_HEADERS + 1))
    with pytest.raises(BadMessage, match="more than"):
        parse_request_head(raw)


def test_hop_by_hop_and_connection_listed_fields_are_not_forwarded() -> None:
    head = parse_request_head(
        b"POST /v1/completions HTTP/1.1\r\nHost: proxy:8800\r\nConnection: keep-alive, X-Hop\r\n"
        b"X-Hop: drop me\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: h2c\r\n"
        b"Proxy-Authorization: Basic Zm9v\r\nExpect: 100-continue\r\n"
        b"authorization: Bearer kept\r\nX-Trace: 1\r\nContent-Length: 2"
    )
    out = upstream_request(head, "127.0.0.1:9000", 2)
    assert out == (
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n"
        b"authorization: Bearer kept\r\nX-Trace: 1\r\nContent-Length: 2\r\n\r\n"
    )


def test_a_chunked_request_goes_on_with_its_length() -> None:
    head = parse_request_head(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nA: b")
    assert head.chunked
    assert upstream_request(head, "u", 5).endswith(b"A: b\r\nContent-Length: 5\r\n\r\n")
    get = parse_request_head(b"GET /v1/models HTTP/1.1\r\nA: b")
    assert b"Content-Length" not in upstream_request(get, "u", 0)


def test_a_response_head_is_passed_on_as_it_came_less_hop_by_hop() -> None:
    head = parse_response_head(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Case: Kept\r\n"
        b"Connection: close, X-Private\r\nX-Private: no\r\nTransfer-Encoding: chunked"
    )
    assert framing_for(head, "POST") == (Framing.CHUNKED, 0)
    assert client_response(head, True, False) == (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Case: Kept\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    assert client_response(head, False, True).endswith(
        b"X-Case: Kept\r\nConnection: close\r\n\r\n"
    )  # an HTTP/1.0 client: de-chunked, then closed


@pytest.mark.parametrize(
    "status, method, headers, framing",
    [
        (200, "HEAD", b"Content-Length: 10", (Framing.NONE, 0)),
        (204, "POST", b"Content-Length: 10", (Framing.NONE, 0)),
        (304, "GET", b"Transfer-Encoding: chunked", (Framing.NONE, 0)),
        (200, "GET", b"Content-Length: 0", (Framing.NONE, 0)),
        (200, "GET", b"Content-Length: 7", (Framing.LENGTH, 7)),
        (200, "GET", b"X: y", (Framing.CLOSE, 0)),
    ],
)
def test_body_framing(status: int, method: str, headers: bytes, framing: tuple) -> None:
    head = parse_response_head(b"HTTP/1.1 %d X\r\n%s" % (status, headers))
    assert framing_for(head, method) == framing


def test_bad_status_lines_are_refused() -> None:
    for raw in (b"HTTP/1.1 20 OK", b"HTTP/2 200 OK", b"ICY 200 OK", b"HTTP/1.1 2000 OK"):
        with pytest.raises(BadMessage):
            parse_response_head(raw)


def test_pass_chunked_says_what_followed_the_end() -> None:
    c = Chunked()
    assert c.feed(b"3\r\nabc\r\n0\r\n\r\nGET / HTTP") == b"abc"
    assert c.done and c.extra and c.leftover == len(b"GET / HTTP")


def test_end_to_end_drops_what_connection_names_case_insensitively() -> None:
    headers = [(b"CONNECTION", b"X-A , x-b"), (b"x-A", b"1"), (b"X-B", b"2"), (b"X-C", b"3")]
    assert end_to_end(headers) == [(b"X-C", b"3")]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_are_a_head_or_bad_message(raw: bytes) -> None:
    for parse in (parse_request_head, parse_response_head):
        try:
            head = parse(raw)
        except BadMessage:
            continue
        if isinstance(head, ResponseHead):
            try:
                framing_for(head, "GET")
            except BadMessage:
                pass


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.from_regex(rb"\A[A-Za-z0-9-]{1,20}\Z"),
            st.from_regex(rb"\A[\x20-\x7e]{0,40}\Z"),
        ),
        max_size=20,
    )
)
def test_fields_round_trip(fields: list[tuple[bytes, bytes]]) -> None:
    raw = b"GET /p HTTP/1.1" + b"".join(b"\r\n" + k + b": " + v for k, v in fields)
    try:
        head = parse_request_head(raw)
    except BadMessage:
        return  # e.g. two disagreeing Content-Length values
    assert head.headers == [(k, v.strip(b" \t")) for k, v in fields]


def test_framing_fields_survive_a_connection_field_naming_them() -> None:
    head = parse_response_head(
        b"HTTP/1.1 200 OK\r\nConnection: content-length, transfer-encoding, x-a\r\n"
        b"X-A: 1\r\nContent-Length: 5"
    )
    assert framing_for(head, "GET") == (Framing.LENGTH, 5)
    assert client_response(head, False, False) == (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")


def test_a_response_with_both_lengths_loses_its_content_length() -> None:
    head = parse_response_head(
        b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\nTransfer-Encoding: chunked\r\nX: y"
    )
    assert framing_for(head, "GET") == (Framing.CHUNKED, 0)
    assert client_response(head, True, False) == (
        b"HTTP/1.1 200 OK\r\nX: y\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    assert client_response(head, False, True) == (
        b"HTTP/1.1 200 OK\r\nX: y\r\nConnection: close\r\n\r\n"
    )
