"""The SSE and NDJSON decoders, fed bytes split in every awkward place."""

from __future__ import annotations

from tui.transport.sse import NDJSONDecoder, SSEDecoder, SSEEvent

STREAM = (
    b": keep-alive comment\r\n"
    b'data: {"a": 1}\r\n\r\n'
    b"event: ping\ndata: x\n\n"
    b"data: line1\ndata:line2\n\n"
    b"id: 7\rdata: caf\xc3\xa9\r\r"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SSEEvent('{"a": 1}'),
    SSEEvent("x", "ping"),
    SSEEvent("line1\nline2"),
    SSEEvent("café", id="7"),
    SSEEvent("[DONE]", id="7"),
]


def test_whole_stream() -> None:
    assert SSEDecoder().feed(STREAM) == EXPECTED


def test_every_split_point_gives_the_same_events() -> None:
    for cut in range(1, len(STREAM)):
        d = SSEDecoder()
        got = d.feed(STREAM[:cut]) + d.feed(STREAM[cut:]) + d.close()
        assert got == EXPECTED, cut


def test_byte_at_a_time() -> None:
    d = SSEDecoder()
    got = [ev for i in range(len(STREAM)) for ev in d.feed(STREAM[i : i + 1])]
    assert got == EXPECTED


def test_event_without_blank_line_comes_out_at_close() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\n\ndata: tail") == [SSEEvent("a")]
    assert d.close() == [SSEEvent("tail")]


def test_field_without_colon_and_empty_events() -> None:
    d = SSEDecoder()
    assert d.feed(b"data\n\n\n\nevent: x\n\n") == [SSEEvent("")]


def test_ndjson_lines_split_anywhere() -> None:
    body = b'{"a":1}\n\n{"b":"\xc3\xa9"}\r\n{"c":3}'
    for cut in range(1, len(body)):
        d = NDJSONDecoder()
        lines = d.feed(body[:cut]) + d.feed(body[cut:])
        assert lines == ['{"a":1}', '{"b":"é"}']
        assert d.close() == '{"c":3}'


def test_feed_data_gives_the_data_of_feed_at_every_split_point() -> None:
    for cut in range(1, len(STREAM)):
        d = SSEDecoder()
        got = d.feed_data(STREAM[:cut]) + d.feed_data(STREAM[cut:])
        got += [ev.data for ev in d.close()]
        assert got == [ev.data for ev in EXPECTED], cut


LF_STREAM = (
    b'data: {"a": 1}\n\n'
    b"data: caf\xc3\xa9\n\n"
    b": comment\n\n\n"
    b"event: ping\ndata: x\n\n"
    b"data: line1\ndata:line2\n\n"
    b"data\n\n"
    b"data: bad \xff byte\n\n"
    b"data: [DONE]\n\n"
    b"data: tail"
)


def test_feed_payloads_fast_path_matches_the_full_rules_at_every_split_point() -> None:
    whole = SSEDecoder()
    expected = [ev.data for ev in whole.feed(LF_STREAM) + whole.close()]
    assert expected[-1] == "tail" and "café" in expected
    for stream in (LF_STREAM, LF_STREAM.replace(b"data: x\n", b"data: x\r\n")):
        for cut in range(1, len(stream)):
            for cut2 in (cut, min(len(stream), cut + 7)):
                d = SSEDecoder()
                got = d.feed_payloads(stream[:cut]) + d.feed_payloads(stream[cut:cut2])
                got += d.feed_payloads(stream[cut2:])
                texts = [p.decode("utf-8", "replace") for p in got]
                texts += [ev.data for ev in d.close()]
                assert texts == expected, (stream, cut, cut2)


def test_an_empty_read_between_cr_and_lf_keeps_them_one_line_end() -> None:
    # "\r", b"", "\n" is one CRLF: the empty read once dropped the pending CR, so the LF
    # made a blank line that dispatched "a" and "b" as two events
    for method in ("feed", "feed_data"):
        d = SSEDecoder()
        feed = getattr(d, method)
        got = feed(b"data: a\r") + feed(b"") + feed(b"\ndata: b\n\n")
        assert [getattr(ev, "data", ev) for ev in got] == ["a\nb"], method
    n = NDJSONDecoder()
    assert n.feed(b'{"a":1}\r') + n.feed(b"") + n.feed(b"\n{}\n") == ['{"a":1}', "{}"]


def test_reads_of_exactly_one_event_match_the_full_rules() -> None:
    """The usual read of a token stream is one whole ``data: <payload>`` event, which
    feed_payloads takes by a fast path; every read here, alone or after any other, gives
    what the full rules give."""
    reads = [
        b'data: {"a": 1}\n\n',
        b"data: \n\n",  # an empty payload is an event
        b"data:  two spaces\n\n",  # one space is the separator, the other is data
        b"data:x\n\n",  # no space
        b"data: a\ndata: b\n\n",  # two data lines: one event "a\nb"
        b"data: cr\r\n\r\n",
        b"data: a\rb\n\n",  # a CR alone ends a line: "a" is the data, "b" a field
        b"data: half\n",  # the rest comes in the next read
        b"\n",
        b"event: e\ndata: named\n\n",
        b": comment\n\n",
        b"data: caf\xc3\xa9 \xff\n\n",
        b"data: [DONE]\n\n",
    ]
    for first in reads:
        for second in reads:
            fast = SSEDecoder()
            got = fast.feed_payloads(first) + fast.feed_payloads(second)
            full = SSEDecoder()
            want = [e.data for e in full.feed(first + second)]
            # payloads stay bytes; invalid UTF-8 is replaced where they are decoded
            assert [g.decode("utf-8", "replace") for g in got] == want, (first, second)
