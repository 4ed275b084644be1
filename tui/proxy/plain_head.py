"""The plain request head: recognised by one compiled regex, sent upstream before it is
parsed.

Most requests a proxy in front of an engine sees are alike: a POST of a JSON body with a
Content-Length and a handful of ordinary headers. :func:`match_plain` recognises such a
head in one regex match; :func:`plain_upstream_head` gives the head the proxy sends
upstream for it, byte for byte what :func:`~tui.proxy.wire.upstream_request` makes of
the same head parsed by :func:`~tui.transport.http_head.parse_request_head`. The proxy's client
connection sends a plain request at once and parses it after the send, off the request's
way in (tui/proxy/client_conn.py). Python code there runs with cold caches between
requests, at several times its hot cost: one regex match and one substitution take the
place of the parse, the checks and the upstream head's assembly, line by line.

A head is *plain* when it is, exactly:

- ``POST``, an origin-form target (``/`` then visible ASCII), ``HTTP/1.1``, one space
  between them;
- header lines ``Name: value``: the name an RFC 9110 token, one space after the colon,
  the value visible ASCII words separated by spaces (no tab, no control byte, nothing
  outside ASCII, no space at either end; empty is allowed);
- exactly one Content-Length, its value 1 to 19 digits without a leading zero;
- no Transfer-Encoding, Expect, Close or hop-by-hop field
  (:data:`~tui.proxy.wire.HOP_BY_HOP`), except Connection with the single option
  ``keep-alive`` or ``close``; any number of Host fields (the upstream's replaces them);
- at most :data:`~tui.transport.http_head.MAX_HEADERS` fields, the blank line within
  :data:`~tui.transport.http_head.HEAD_LIMIT` + 4 bytes.

Every plain head is one the strict parser accepts, and its upstream head is the same
bytes (tests/proxy/test_plain_head.py: generated heads, hostile shapes among them).
Anything else is not plain, and takes the strict path as before.
"""

from __future__ import annotations

import re
import sys

from tui.proxy.wire import HOP_BY_HOP
from tui.transport.http_head import HEAD_LIMIT, MAX_HEADERS

# Names a plain field may not have: the hop-by-hop ones, those upstream_request drops or
# replaces, and Close (Connection: close lists it, so such a field would be dropped).
_NOT_PLAIN = sorted(HOP_BY_HOP | {b"host", b"content-length", b"expect", b"close"})
_NAME = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]++"
# visible ASCII and spaces, none at either end; possessive (no backtracking), and one
# character class run over the value (a regex loop per word costs ~15 ns a byte)
_VALUE = rb"(?:[\x21-\x7e][\x20-\x7e]*+(?<! ))?+"
_FIELD = rb"(?!(?i:" + b"|".join(map(re.escape, _NOT_PLAIN)) + rb"):)" + _NAME + b": " + _VALUE
_HOST = rb"(?i:host): " + _VALUE
_CONNECTION = rb"(?i:connection): (?i:keep-alive|close)"
_ANY = rb"(?:(?:" + b"|".join((_FIELD, _HOST, _CONNECTION)) + rb")\r\n){0,%d}+" % MAX_HEADERS
# Possessive quantifiers (no backtracking, so linear in the head) are Python 3.11's; on
# 3.10 there is no fast path and every head takes the strict one.
_PLAIN = re.compile(
    rb"POST (?P<target>/[\x21-\x7e]*+) HTTP/1\.1\r\n"
    rb"(?P<fields>" + _ANY + rb"(?i:content-length): (?P<length>[1-9][0-9]{0,18})\r\n"
    + _ANY + rb")\r\n"
) if sys.version_info >= (3, 11) else None  # fmt: skip
# The fields upstream_request does not pass on as they came, among a plain head's.
_DROPPED = re.compile(rb"^(?:host|content-length|connection):[^\n]*+\n", re.I | re.M)


def match_plain(buf: bytes | bytearray, end: int) -> re.Match[bytes] | None:
    """The plain head at the start of ``buf`` (see the module docstring), or None.
    ``end``: where its blank line begins, ``buf.find(b"\\r\\n\\r\\n", 0, HEAD_LIMIT + 4)``
    (found first, so that a head arriving in pieces is matched once, whole). The match's
    ``end()`` is where the body begins; its groups: ``target``, ``fields`` (the header
    lines, each with its CRLF) and ``length`` (the Content-Length's digits), read from
    ``buf`` when asked for: ``buf`` must not change while the match is in use."""
    if _PLAIN is None or not 0 < end <= HEAD_LIMIT:
        return None
    m = _PLAIN.match(buf, 0, end + 4)
    if m is None or buf.count(b"\r\n", 0, end) > MAX_HEADERS:
        return None  # (the request line's CRLF is counted, the last field's is not)
    return m


def plain_upstream_head(m: re.Match[bytes], host: str, prefix: str = "") -> bytes:
    """The head sent upstream for the plain head ``m``: ``upstream_request(head, host,
    length, prefix)`` of the same head, parsed, with its Content-Length."""
    return b"".join(
        (
            f"POST {prefix}".encode("latin-1"),
            m["target"],
            f" HTTP/1.1\r\nHost: {host}\r\n".encode("latin-1"),
            _DROPPED.sub(b"", m["fields"]),
            b"Content-Length: ",
            m["length"],
            b"\r\n\r\n",
        )
    )
