"""Server access: the headers and TLS setting every request to one server carries, and
URLs made safe to show.

One :class:`HttpAccess` per server is used by the engine's own client *and* by every
scraper and probe of that server (/metrics, /slots, /props, /api/ps, detection), so a
protected or self-signed server that answers the engine also answers its panels.

Credentials written into a URL (``http://user:pass@host``) never travel further as part
of it: :func:`split_credentials` turns them into an ``Authorization: Basic`` header (what
an HTTP client would send for them) and leaves a clean URL, which is what engine names,
reports, session logs and error messages then show. :func:`redact_url` is for URLs shown
before that (a command-line argument echoed in an error).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

USER_AGENT = "infertop"
_BAD_HEADER_CHARS = ("\r", "\n", "\0")


class HeaderError(ValueError):
    """A header that cannot be sent (its name or value would break the request)."""


@dataclass(frozen=True)
class HttpAccess:
    """What every request to one server carries: headers and whether TLS is verified."""

    headers: dict[str, str] = field(default_factory=lambda: {"User-Agent": USER_AGENT})
    verify_tls: bool = True


def check_header(name: object, value: object) -> None:
    """Refuse a header whose name or value is not text, or holds CR, LF or NUL (a value
    with a line break would inject headers into the request)."""
    if not isinstance(name, str) or not name.strip():
        raise HeaderError(f"header name {name!r} is not a non-empty string")
    if not isinstance(value, str):
        raise HeaderError(f"header {name!r}: value must be a string, got {type(value).__name__}")
    for text, what in ((name, "name"), (value, "value")):
        if any(c in text for c in _BAD_HEADER_CHARS):
            raise HeaderError(f"header {name!r}: the {what} holds a line break or NUL")
    if ":" in name or " " in name.strip():
        raise HeaderError(f"header name {name!r} holds ':' or a space")


def split_credentials(url: str) -> tuple[str, str | None]:
    """(``url`` without ``user:password@``, the ``Authorization`` value they stand for)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    clean = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return clean, f"Basic {token}"


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (the user name is kept)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, sep, _ = userinfo.partition(":")
    shown = f"{user}:***" if sep else "***"
    return urlunsplit((parts.scheme, f"{shown}@{hostport}", parts.path, parts.query, ""))
