"""The plain request head (tui/proxy/plain_head.py), a second parser on the proxy's trust
boundary, against the strict one (tui/transport/http_head.py).

Equivalence: generated heads, most of them near plain and a third or more carrying one
or more hostile shapes (Content-Length with Transfer-Encoding, two Content-Lengths,
obs-fold, bare LF, NUL, CR and other control bytes in values, non-token names, spaces
around the colon, absolute-form and odd targets, other methods and versions,
Connection listing other fields, hop-by-hop names in mixed case, empty values, heads
near MAX_HEADERS and HEAD_LIMIT). Whenever match_plain takes a head, parse_request_head
takes it too, with the same target, length and end, and upstream_request makes the
same bytes of it as plain_upstream_head. Then explicit hostile heads that must not be
plain, and the common clients' heads that must be.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.proxy.plain_head import match_plain, plain_upstream_head
from tui.proxy.wire import upstream_request
from tui.transport.http_head import HEAD_LIMIT, MAX_HEADERS, BadMessage, parse_request_head

UPSTREAMS = [("127.0.0.1:8000", ""), ("gpu-box:80", "/gateway/v1"), ("h", "/p")]
METHODS = [b"POST"] * 12 + [b"GET", b"post", b"PUT", b"PATCH", b"POST ", b"P\x00ST", b""]
TARGETS = [b"/v1/chat/completions"] * 8 + [
    b"/v1/completions?trace=1&key=a%20b",
    b"/",
    b"/api/chat",
    b"/infertop/health",
    b"http://evil/v1/chat/completions",
    b"*",
    b"v1/chat",
    b"/a b",
    b"/a\x7f",
    b"/\xc3\xa9",
    b"/a\tb",
    b"",
]
VERSIONS = [b"HTTP/1.1"] * 12 + [b"HTTP/1.0", b"HTTP/2", b"http/1.1", b"HTTP/1.1 ", b"HTTP/1.10"]
NAMES = [b"User-Agent", b"Authorization", b"Content-Type", b"Accept", b"X-Custom"]
NAMES += [b"x-stainless-os"]
NAMES += [b"Hostname", b"X-Host", b"Tex", b"Content-Lengths", b"Connectionx", b"Upgrades"]
HOSTILE_NAMES = [b"X(a)", b"X Y", b"X\x00", b"\xc3\xa9", b"", b"X:Y", b"X\tY", b'X"', b"X/Y"]
SPECIAL = [b"Host", b"Content-Length", b"Transfer-Encoding", b"Connection", b"Keep-Alive"]
SPECIAL += [b"Proxy-Connection", b"Proxy-Authorization", b"Proxy-Authenticate", b"TE"]
SPECIAL += [b"Trailer", b"Upgrade", b"Expect", b"Close", b"X-Hop"]
WORDS = [b"a", b"Bearer", b"sk-0123", b"application/json", b"*/*", b"gzip,", b"x=1;y=2"]
WORDS += [b"\xe2\x82"]  # (the last: not ASCII; only among a hostile value's odd bytes)
ODD_BYTES = [b"\x00", b"\r", b"\n", b"\t", b"\x01", b"\x1f", b"\x7f", b"\x80", b"\xff", b" ", b":"]
LENGTHS = [b"27", b"1", b"0", b"027", b" 27", b"27 ", b"27,27", b"27, 28", b"+5", b"-1", b"1e3"]
LENGTHS += [b"9" * 19, b"1" + b"0" * 19, b"0x1b", b"", b"\xd9\xa3"]  # (an Arabic-Indic digit)
CONNECTIONS = [b"keep-alive", b"close", b"Keep-Alive", b"CLOSE", b"keep-alive, X-Hop", b"X-Hop"]
CONNECTIONS += [b"upgrade", b"close,", b" close", b"te", b"keep-alive\t", b"keep-alive, x-custom"]
CONNECTIONS += [b"User-Agent", b"close, Accept", b"keep-alive,close"]
CODINGS = [b"chunked", b"Chunked", b"gzip, chunked", b"identity", b""]


def case(name: bytes, rng: random.Random) -> bytes:
    """``name`` in a random case, now and then."""
    r = rng.random()
    return name.upper() if r < 0.1 else name.lower() if r < 0.25 else name


def value(rng: random.Random, hostile: bool) -> bytes:
    words = [rng.choice(WORDS[:-1]) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
    v = b" ".join(words)
    if hostile and rng.random() < 0.5:
        at = rng.randint(0, len(v))
        v = v[:at] + rng.choice(ODD_BYTES + WORDS[-1:] + [b"  "]) + v[at:]
    return v


def field_line(rng: random.Random, hostile: bool) -> bytes:
    """One header line, without its line end."""
    if rng.random() < (0.3 if hostile else 0.08):
        name = case(rng.choice(SPECIAL), rng)
        lower = name.lower()
        if lower == b"content-length":
            v = rng.choice(LENGTHS)
        elif lower == b"connection":
            v = rng.choice(CONNECTIONS)
        elif lower == b"transfer-encoding":
            v = rng.choice(CODINGS)
        else:
            v = value(rng, hostile)
    else:
        name = case(rng.choice(NAMES), rng)
        v = value(rng, hostile)
    sep = b": "
    if hostile:
        r = rng.random()
        if r < 0.1:
            name = rng.choice(HOSTILE_NAMES)
        elif r < 0.25:
            sep = rng.choice([b":", b" : ", b" :", b":  ", b":\t", b"\t: ", b""])
        elif r < 0.3:
            return rng.choice([b" ", b"\t"]) + name + sep + v  # obs-fold
        elif r < 0.35:
            v += rng.choice([b" ", b"\t", b"  "])
    return name + sep + v


def request(rng: random.Random) -> bytes:
    """A request head (its blank line included) and a body, near plain or hostile."""
    hostile = rng.random() < 0.5
    method, target, version = b"POST", rng.choice(TARGETS[:9]), b"HTTP/1.1"
    if hostile and rng.random() < 0.3:
        method, target = rng.choice(METHODS), rng.choice(TARGETS)
        version = rng.choice(VERSIONS)
    lines = [method + b" " + target + b" " + version]
    if rng.random() < 0.9:
        lines.append(case(b"Host", rng) + b": " + rng.choice([b"proxy:8800", b"", b"a b"]))
    lines += [field_line(rng, hostile) for _ in range(rng.randint(0, 8))]
    if hostile and rng.random() < 0.2:  # Connection naming a field that is there
        named = rng.choice([b"Close", b"X-Custom", b"user-agent", b"Accept", b"X-Hop"])
        listed = rng.choice([b"", b"keep-alive, "]) + case(named, rng)
        for line in (b"Connection: " + listed, named + b": x"):
            lines.insert(rng.randint(1, len(lines)), line)
    if rng.random() < 0.85:
        length = rng.choice(LENGTHS) if hostile and rng.random() < 0.3 else b"27"
        lines.insert(rng.randint(1, len(lines)), b"Content-Length: " + length)
    if rng.random() < 0.05:  # MAX_HEADERS fields, or one more or less
        more = MAX_HEADERS + rng.randint(-1, 1) - (len(lines) - 1)
        lines += [b"X-%d: 1" % i for i in range(max(more, 0))]
    if rng.random() < 0.03:  # near HEAD_LIMIT
        pad = HEAD_LIMIT - sum(len(x) + 2 for x in lines) + rng.randint(-12, 12)
        lines.insert(rng.randint(1, len(lines)), b"X-Pad: " + b"p" * max(pad, 0))
    eol = b"\r\n"
    if hostile and rng.random() < 0.1:
        eol = rng.choice([b"\n", b"\r", b"\r\r\n"])
    body = b'{"model":"m","stream":true}'
    end = rng.choice([b"\r\n\r\n"] * 8 + [b"\n\n", b"\r\n\n", b"\n\r\n", b"\r\n \r\n"])
    return eol.join(lines) + end + body


def matched(raw: bytes) -> re.Match[bytes] | None:
    """match_plain as the client connection calls it: with the blank line found first."""
    return match_plain(raw, raw.find(b"\r\n\r\n", 0, HEAD_LIMIT + 4))


def check(raw: bytes) -> bool:
    """The equivalence for one input; whether the head was plain."""
    m = matched(raw)
    if m is None:
        return False
    end = raw.find(b"\r\n\r\n", 0, HEAD_LIMIT + 4)
    assert end == m.end() - 4, raw[:300]
    try:
        head = parse_request_head(raw[:end])
    except BadMessage as e:
        raise AssertionError(f"plain, yet the strict parser refuses it ({e}): {raw[:300]!r}") from e
    assert (head.method, head.version, head.chunked) == ("POST", "HTTP/1.1", False), raw[:300]
    assert head.target.encode() == m["target"] and head.content_length == int(m["length"])
    assert len(head.headers) <= MAX_HEADERS
    for host, prefix in UPSTREAMS:
        want = upstream_request(head, host, int(m["length"]), prefix)
        assert plain_upstream_head(m, host, prefix) == want, raw[:300]
    return True


def test_plain_heads_are_strict_heads_with_the_same_upstream_bytes() -> None:
    seen = {True: 0, False: 0}

    @settings(
        max_examples=300,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.integers(min_value=0, max_value=2**64 - 1))
    def run(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(40):
            seen[check(request(rng))] += 1

    run()
    # neither side of the property may be vacuous
    assert seen[True] >= 1500 and seen[False] >= 3000, seen


@settings(max_examples=300, deadline=None, database=None)
@given(st.binary(max_size=300))
def test_any_bytes_after_a_plain_request_line(tail: bytes) -> None:
    check(b"POST /v1/chat/completions HTTP/1.1\r\n" + tail)
    check(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 27\r\n" + tail)


def plain(*lines: bytes) -> bytes:
    return b"\r\n".join([b"POST /v1/chat/completions HTTP/1.1", *lines]) + b"\r\n\r\n"


CL = b"Content-Length: 27"
NOT_PLAIN = {
    "CL and TE": plain(b"Host: p", CL, b"Transfer-Encoding: chunked"),
    "TE and CL, mixed case": plain(b"transfer-ENCODING: chunked", CL),
    "two CLs that agree": plain(CL, CL),
    "two CLs that differ": plain(CL, b"Content-Length: 28"),
    "a CL list": plain(b"Content-Length: 27, 27"),
    "a CL with a leading zero": plain(b"Content-Length: 027"),
    "CL 0": plain(b"Content-Length: 0"),
    "a 20-digit CL": plain(b"Content-Length: 1" + b"0" * 19),
    "no CL": plain(b"Host: p"),
    "obs-fold": plain(CL, b"X-A: a", b" folded"),
    "obs-fold by tab": plain(CL, b"X-A: a", b"\tfolded"),
    "a bare LF": b"POST /v1/chat/completions HTTP/1.1\nContent-Length: 27\n\n",
    "a bare LF in a line": plain(CL, b"X-A: a\nX-B: b"),
    "NUL in a value": plain(CL, b"X-A: a\x00b"),
    "CR in a value": plain(CL, b"X-A: a\rb"),
    "a tab in a value": plain(CL, b"X-A: a\tb"),
    "DEL in a value": plain(CL, b"X-A: a\x7fb"),
    "a non-ASCII value": plain(CL, b"X-A: \xc3\xa9"),
    "a value's trailing space": plain(CL, b"X-A: a "),
    "two spaces after the colon": plain(CL, b"X-A:  a"),
    "no space after the colon": plain(CL, b"X-A:a"),
    "a space before the colon": plain(CL, b"X-A : a"),
    "an empty value without its space": plain(CL, b"X-A:"),
    "a name with a space": plain(CL, b"X A: a"),
    "a name with a parenthesis": plain(CL, b"X(A): a"),
    "an empty name": plain(CL, b": a"),
    "a line without a colon": plain(CL, b"X-A"),
    "absolute-form": b"POST http://evil/v1 HTTP/1.1\r\n" + CL + b"\r\n\r\n",
    "asterisk-form": b"POST * HTTP/1.1\r\n" + CL + b"\r\n\r\n",
    "HTTP/1.0": b"POST /v1 HTTP/1.0\r\n" + CL + b"\r\n\r\n",
    "GET": b"GET /v1 HTTP/1.1\r\n" + CL + b"\r\n\r\n",
    "lower-case post": b"post /v1 HTTP/1.1\r\n" + CL + b"\r\n\r\n",
    "two spaces in the request line": b"POST  /v1 HTTP/1.1\r\n" + CL + b"\r\n\r\n",
    "a blank line first": b"\r\n" + plain(CL),
    "Connection listing a field": plain(CL, b"Connection: keep-alive, X-Hop", b"X-Hop: 1"),
    "Connection listing only a field": plain(CL, b"Connection: X-Hop", b"X-Hop: 1"),
    "Connection: upgrade": plain(CL, b"Connection: upgrade", b"Upgrade: h2c"),
    "Close with Connection: close": plain(CL, b"Connection: close", b"Close: x"),
    "Keep-Alive": plain(CL, b"Keep-Alive: timeout=5"),
    "TE, mixed case": plain(CL, b"tE: trailers"),
    "Trailer": plain(CL, b"Trailer: X-A"),
    "Upgrade, upper case": plain(CL, b"UPGRADE: h2c"),
    "Proxy-Authorization": plain(CL, b"proxy-authorization: Basic Zm9v"),
    "Proxy-Connection": plain(CL, b"Proxy-Connection: keep-alive"),
    "Expect": plain(CL, b"Expect: 100-continue"),
    "too many fields": plain(CL, *(b"X-%d: 1" % i for i in range(MAX_HEADERS))),
    "a head past HEAD_LIMIT": plain(CL, b"X-Pad: " + b"p" * HEAD_LIMIT),
    "no blank line yet": b"POST /v1 HTTP/1.1\r\n" + CL + b"\r\n",
}


@pytest.mark.parametrize("raw", NOT_PLAIN.values(), ids=NOT_PLAIN.keys())
def test_hostile_heads_are_not_plain(raw: bytes) -> None:
    assert matched(raw) is None
    assert matched(raw + b'{"model":"m","stream":true}') is None


SDK_LIKE = plain(  # as httpx (the openai SDK) sends it, less some X-Stainless fields
    b"Host: 127.0.0.1:8800",
    b"Accept-Encoding: gzip, deflate",
    b"Connection: keep-alive",
    b"Accept: application/json",
    b"Content-Type: application/json",
    b"User-Agent: OpenAI/Python 1.99.9",
    b"X-Stainless-Lang: python",
    b"Authorization: Bearer sk-local",
    b"X-Empty: ",
    CL,
)


@pytest.mark.parametrize(
    "raw",
    [
        SDK_LIKE,
        plain(CL),
        plain(b"host: a", b"HOST: b", b"content-length: 27", b"CONNECTION: Close"),
        plain(*(b"X-%d: 1" % i for i in range(MAX_HEADERS - 1)), CL),  # MAX_HEADERS fields
        plain(CL, b"X-Pad: " + b"p" * (HEAD_LIMIT - 80)),
    ],
    ids=["sdk", "bare", "cases", "max-fields", "near-limit"],
)
def test_common_heads_are_plain_with_the_same_upstream_bytes(raw: bytes) -> None:
    assert check(raw + b'{"model":"m","stream":true}')


def test_head_limit_holds_whatever_end_match_plain_is_given() -> None:
    def padded(end: int) -> bytes:  # a plain head whose blank line begins at ``end``
        short = len(plain(CL, b"X-Pad: ")) - 4
        return plain(CL, b"X-Pad: " + b"p" * (end - short))

    assert check(padded(HEAD_LIMIT))
    raw = padded(HEAD_LIMIT + 1)
    assert match_plain(raw, raw.find(b"\r\n\r\n")) is None
    assert match_plain(raw, -1) is None
