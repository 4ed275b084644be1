"""Fuzzing HTTP/1.1 chunked framing (tui/transport/http_framing.py: Chunked).

Generated: (1) valid bodies: chunks of random bytes (CR, LF and "0\\r\\n" inside the data
too), sizes written in lower or upper case hex with leading zeros (up to 16 digits),
extensions with and without whitespace, trailing whitespace, trailer fields, and
sometimes bytes after the end; (2) the same bodies with one targeted corruption: a size
line that int(x, 16) would take but HTTP does not ("-5", "+5", " 5", "1_0", "0x5"), a
non-hex, empty or 17-digit size, a bare LF in the size line, two wrong bytes where the
CRLF after a chunk's data is due, or the body cut short; (3) random bytes from chunked
syntax. Every input is fed whole and in random pieces (empty ones too).

Asserted: only FramingError (tui/transport/http_errors.py) is ever raised; a valid body
gives its data, ``done``, and says whether bytes followed its end, in any pieces; a
corrupted size line is refused with a message that quotes it, a missing CRLF with one
that quotes the bytes found instead, and a cut-short body is simply not done; any input
gives the same outcome in pieces as whole. Also: every Content-Length of up to 3
characters from a hostile alphabet is taken exactly when it is decimal digits.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings

from tests.fuzz.fuzz_support import FUZZ, MIN_CASES, SEEDS, CaseCount, pieces
from tui.transport.http_errors import FramingError
from tui.transport.http_framing import Chunked
from tui.transport.http_head import BadMessage, framing_for, parse_response_head

SPLITS = 7
DATA_BYTES = [b"a", b"\r", b"\n", b"\r\n", b"0\r\n\r\n", b"\xff", b";", b" "]


def size_line(size: int, rng: random.Random) -> bytes:
    digits = f"{size:x}".encode()
    if rng.random() < 0.3:
        digits = digits.upper()
    if rng.random() < 0.2:
        digits = b"0" * rng.randint(1, 16 - len(digits)) + digits
    ext = rng.choice([b"", b"", b";a=b", b" ;a", b';n="v;x"', b"\t; a = b ", b" ", b"\t"])
    return digits + ext


def valid_body(rng: random.Random) -> tuple[list[bytes], list[bytes], bytes]:
    """(size lines, chunks, trailers + final CRLF): the wire is their interleaving."""
    chunks = [
        b"".join(rng.choices(DATA_BYTES, k=rng.randint(1, 12)))
        if rng.random() < 0.5
        else rng.randbytes(rng.randint(1, 40))
        for _ in range(rng.randint(0, 5))
    ]
    sizes = [size_line(len(c), rng) for c in chunks] + [size_line(0, rng)]
    trailers = b"".join(
        rng.choice([b"X-T: 1\r\n", b"Server-Timing: a;dur=1\r\n", b"x:\r\n"])
        for _ in range(rng.choice([0, 0, 1, 2]))
    )
    return sizes, chunks, trailers + b"\r\n"


def wire(sizes: list[bytes], chunks: list[bytes], end: bytes) -> bytes:
    body = b"".join(s + b"\r\n" + c + b"\r\n" for s, c in zip(sizes, chunks, strict=False))
    return body + sizes[-1] + b"\r\n" + end


def outcome(parts: list[bytes]) -> tuple[str, bytes, bool, bool]:
    """("ok", body, done, bytes after the end) or ("error", message, False, False), fed
    as HTTP/1.1 reads would be: no more once the body is done."""
    d, body = Chunked(), b""
    try:
        for i, part in enumerate(parts):
            body += d.feed(part)
            if d.done:
                after = d.extra or any(parts[i + 1 :])
                return "ok", body, True, after
    except FramingError as e:
        return "error", str(e).encode(), False, False
    return "ok", body, False, False


BAD_SIZES = [b"-5", b"-0", b"+5", b" 5", b"1_0", b"0x5", b"0X5", b"g", b"", b"5\n", b"1" * 17]


def test_valid_bodies_decode_in_any_pieces() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        sizes, chunks, end = valid_body(rng)
        garbage = rng.choice([b"", b"", b"", b"HTTP/1.1 200 OK\r\n"])
        data = wire(sizes, chunks, end) + garbage
        want = ("ok", b"".join(chunks), True, bool(garbage))
        for i in range(SPLITS + 1):
            parts = [data] if i == 0 else pieces(data, rng)
            assert outcome(parts) == want, parts
            cases.add()

    run()
    assert cases.n >= MIN_CASES


def test_corrupted_bodies_are_refused_by_name_in_any_pieces() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        sizes, chunks, end = valid_body(rng)
        kind = rng.choice(["size", "size", "crlf", "cut"] if chunks else ["size", "cut"])
        if kind == "size":
            i = rng.randrange(len(sizes))
            bad = rng.choice(BAD_SIZES)
            if bad in (b"-5", b"+5", b" 5") and rng.random() < 0.5:
                bad = bad[:1] + sizes[i]  # a sign or space before the real size
            sizes[i] = bad
            data = wire(sizes, chunks, end)
            want: tuple[str, str] | None = ("error", f"bad chunk size line {bad[:40]!r}")
        elif kind == "crlf":
            i = rng.randrange(len(chunks))
            head = b"".join(s + b"\r\n" + c + b"\r\n" for s, c in zip(sizes[:i], chunks[:i]))
            found = bytes(rng.choice(b"ab\r\n0;") for _ in range(2))
            if found == b"\r\n":
                found = b"\n\r"
            data = head + sizes[i] + b"\r\n" + chunks[i] + found + b"0\r\n\r\n"
            want = ("error", f"bad chunk end: {found!r}")
        else:
            full = wire(sizes, chunks, end)
            data = full[: rng.randrange(len(full))]
            want = None  # not done, nothing refused
        for i in range(SPLITS + 1):
            parts = [data] if i == 0 else pieces(data, rng)
            got = outcome(parts)
            if want is None:
                assert got[0] == "ok" and not got[2], parts
            else:
                assert got[0] == want[0] and got[1].decode().startswith(want[1]), (got, parts)
            cases.add()

    run()
    assert cases.n >= MIN_CASES


SYNTAX = [b"0", b"5", b"a", b"F", b"\r\n", b"\r", b"\n", b";", b" ", b"-", b"+", b"_", b"x"]


def test_random_bytes_give_the_same_outcome_in_any_pieces() -> None:
    cases = CaseCount()

    @settings(FUZZ, max_examples=1300)
    @given(SEEDS)
    def run(seed: int) -> None:
        rng = random.Random(seed)
        if rng.random() < 0.3:
            data = rng.randbytes(rng.randint(0, 40))
        else:
            data = b"".join(rng.choices(SYNTAX, k=rng.randint(0, 30)))
        whole = outcome([data])  # raises nothing but FramingError, or fails here
        for _ in range(SPLITS):
            parts = pieces(data, rng)
            assert outcome(parts) == whole, parts
            cases.add()
        cases.add()

    run()
    assert cases.n >= MIN_CASES


CL_ALPHABET = ["0", "5", "9", " ", "\t", "+", "-", "_", ",", "x", "e", ".", "٣", "5"]


def _framed_length(value: str) -> int | None:
    head = parse_response_head(f"HTTP/1.1 200 OK\r\nContent-Length: {value}".encode())
    return framing_for(head, "GET")[1]


def test_content_length_is_taken_exactly_when_it_is_decimal_digits() -> None:
    """The one head parser (tui/transport/http_head.py, client and proxy): a
    Content-Length is decimal digits, blank space around each value allowed (RFC 9110
    5.5), a list only when every value agrees. Every string of up to 3 characters from an
    alphabet of what int() forgives."""
    n = 0
    for k in range(4):
        for chars in itertools.product(CL_ALPHABET, repeat=k):
            value = "".join(chars)
            parts = {p.strip(" \t") for p in value.split(",")}
            (one,) = parts if len(parts) == 1 else ("x",)
            if one.isascii() and one.isdigit():
                assert _framed_length(value) == int(one)
            else:
                with pytest.raises(BadMessage, match="Content-Length"):
                    _framed_length(value)
            n += 1
    assert n == sum(len(CL_ALPHABET) ** k for k in range(4))
