"""Who sent a proxied request, as far as the proxy can honestly tell (a
:class:`~tui.core.outcome.ClientIdentity`), each part from where it says:

- ``key_fingerprint`` — the API key (``Authorization: Bearer KEY``, else ``x-api-key``)
  as a keyed hash: ``k:`` and the first 12 hex digits of HMAC-SHA256(secret, key), the
  secret one per installation (:func:`load_secret`: 32 random bytes in the data folder,
  0600). The key itself is never kept; the same key gives the same fingerprint on this
  installation only, and a fingerprint cannot be turned back into its key.
- ``name`` — the name config gives that fingerprint (``[clients]``: ``"k:…" = "alice"``).
- ``user`` — the body's OpenAI ``user`` or Anthropic ``metadata.user_id`` (the client's
  own word: anyone may write anything there).
- ``program`` — the client program, named from its User-Agent by :data:`PROGRAMS` (a
  small table); an unknown one stays as it came, cut to :data:`UA_KEPT` characters.
- ``process`` — for a client on this host, the process owning its socket
  (:mod:`tui.proxy.peer_process`, looked up off the request's path).
- ``address`` — the client's IP address.

Every string is bounded (:func:`tui.core.outcome.bounded`); shown on a terminal it
passes :func:`tui.core.safe_text.terminal_safe`; stored, it is only ever an SQL
parameter.
"""

from __future__ import annotations

import hmac
import os
import re
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Final

from tui.core.outcome import ClientIdentity, bounded
from tui.core.session import open_private
from tui.transport.http_head import RequestHead

SECRET_BYTES: Final = 32
FINGERPRINT_HEX: Final = 12
UA_KEPT: Final = 80
KEY_KEPT: Final = 4096  # a longer "key" is hashed by its first 4 KiB

# (a pattern searched in the User-Agent, the program's name): the first that matches
PROGRAMS: Final[tuple[tuple[re.Pattern[str], str], ...]] = tuple(
    (re.compile(pattern, re.IGNORECASE), name)
    for pattern, name in (
        (r"\bclaude-cli/|\bclaude-code\b", "Claude Code"),
        (r"\bcodex_cli_rs/|\bcodex_exec\b|\bcodex-tui\b", "Codex"),
        (r"^Anthropic/Python\b", "anthropic-sdk (python)"),
        (r"^Anthropic/JS\b", "anthropic-sdk (ts)"),
        (r"^OpenAI/Python\b", "openai-python"),
        (r"^OpenAI/JS\b", "openai-node"),
        (r"\bollama-python/|^ollama-python\b", "ollama-python"),
        (r"\bollama-js/", "ollama-js"),
        (r"\blitellm\b", "litellm"),
        (r"\blangchain\b", "langchain"),
        (r"\bllama-index\b|\bllamaindex\b", "llama-index"),
        (r"^infertop/", "infertop"),
        (r"^curl/", "curl"),
        (r"^Wget/", "wget"),
        (r"^python-requests/", "python-requests"),
        (r"^python-httpx/", "httpx"),
        (r"^Python-urllib/", "python-urllib"),
        (r"\baiohttp/", "aiohttp"),
        (r"^Go-http-client/", "go-http"),
        (r"^node-fetch\b|^undici\b|^node\b", "node"),
        (r"^Mozilla/", "browser"),
    )
)
UA_LOOKED_AT: Final = 512  # the table reads this much of a User-Agent (a 1 MB one too)


_PROGRAM_CACHE: dict[str, str | None] = {}  # clients send the same User-Agent again
PROGRAM_CACHE_SIZE: Final = 256


def program_of(user_agent: str | None) -> str | None:
    """The client program a User-Agent names (:data:`PROGRAMS`), else the User-Agent
    itself cut to :data:`UA_KEPT` characters; None: none sent."""
    if not user_agent:
        return None
    head = user_agent[:UA_LOOKED_AT]
    if head in _PROGRAM_CACHE:
        return _PROGRAM_CACHE[head]
    found = next((name for pattern, name in PROGRAMS if pattern.search(head)), None)
    if found is None:
        found = bounded(head.strip(), UA_KEPT) or None
    if len(_PROGRAM_CACHE) >= PROGRAM_CACHE_SIZE:
        _PROGRAM_CACHE.clear()
    _PROGRAM_CACHE[head] = found
    return found


def api_key(head: RequestHead) -> bytes | None:
    """The request's API key: ``Authorization``'s credentials (after a Bearer scheme,
    else the whole value), else ``x-api-key``; None: neither."""
    auth = head.get(b"authorization")
    if auth:
        scheme, _, rest = auth.strip().partition(b" ")
        key = rest.strip() if scheme.lower() == b"bearer" and rest.strip() else auth.strip()
        return key[:KEY_KEPT] or None
    key = (head.get(b"x-api-key") or b"").strip()[:KEY_KEPT]
    return key or None


def load_secret(path: Path) -> bytes:
    """This installation's fingerprint secret, made on first use: :data:`SECRET_BYTES`
    random bytes in ``path``, a file of this user's alone (0600, a 0700 folder; a link,
    another user's file or one not regular is refused: OSError). A file that is too
    short (cut by a crash while being made) is made again."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = open_private(path)
    try:
        data = os.pread(fd, SECRET_BYTES * 2 + 1, 0)
        try:
            secret = bytes.fromhex(data.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            secret = b""
        if len(secret) != SECRET_BYTES:
            secret = os.urandom(SECRET_BYTES)
            os.ftruncate(fd, 0)
            os.write(fd, secret.hex().encode("ascii") + b"\n")
            os.fsync(fd)
        return secret
    finally:
        os.close(fd)


@dataclass
class ClientKeys:
    """Fingerprints of API keys (this installation's secret) and config's names for them."""

    secret: bytes
    names: dict[str, str] = field(default_factory=dict)  # fingerprint -> name

    def fingerprint(self, key: bytes) -> str:
        """``k:`` and :data:`FINGERPRINT_HEX` hex digits of HMAC-SHA256(secret, key)."""
        return "k:" + hmac.digest(self.secret, key, sha256).hex()[:FINGERPRINT_HEX]


def identify(
    head: RequestHead,
    user: str | None,
    address: str | None,
    keys: ClientKeys | None,
    process: str | None = None,
) -> ClientIdentity:
    """A proxied request's client (see the module docstring); ``keys`` None: no
    fingerprints (the proxy was told not to keep them)."""
    fingerprint = name = None
    if keys is not None:
        key = api_key(head)
        if key is not None:
            fingerprint = keys.fingerprint(key)
            name = keys.names.get(fingerprint)
    ua = head.get(b"user-agent")
    return ClientIdentity(
        key_fingerprint=fingerprint,
        name=bounded(name),
        user=bounded(user),
        program=program_of(ua.decode("latin-1") if ua else None),
        process=bounded(process),
        address=bounded(address, 64),
    )


def peer_host(peer: str) -> str | None:
    """The host part of a client label ``host:port`` / ``[v6]:port``."""
    if peer.startswith("["):
        host = peer[1:].partition("]")[0]
        return host or None
    host, sep, _port = peer.rpartition(":")
    return (host if sep else peer) or None
