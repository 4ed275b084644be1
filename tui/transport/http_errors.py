"""The transport's own errors: a peer that broke HTTP/1.1.

:class:`ProtocolError` is the family (a head that is no HTTP/1.1 as infertop accepts it,
:class:`~tui.transport.http_head.BadMessage`, is one); :class:`FramingError` is a body
whose framing is broken (a chunk-size line that is no size, a chunk's data not ended by
CRLF, a line past its limit). The transport and the proxy raise and catch these; only
the lean client's boundary with httpx's world (tui/transport/http1.py, whose callers word
httpx's exception types) maps them to httpx's ``RemoteProtocolError``.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A peer broke HTTP/1.1 (the message says how)."""


class FramingError(ProtocolError):
    """A body's framing is broken (the message quotes what came)."""
