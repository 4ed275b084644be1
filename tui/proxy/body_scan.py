"""A few named fields of a JSON body, read without parsing a large body whole.

The proxy needs a handful of small values from bodies that may be large and are never
trusted: a generation request's ``model`` and ``stream``, who sent it (OpenAI's ``user``,
Anthropic's ``metadata.user_id``: :func:`request_fields`), and an embeddings answer's
``usage`` (and Ollama's counts). Parsing a whole body for them built every value in it: a
30 MiB body of ``[[],[],…]`` cost ~1 GiB and seconds of the proxy's loop, every stream
held meanwhile.

:func:`fields` parses a body of at most :data:`WHOLE_PARSE_BYTES` whole (orjson: whatever
its shape, at most ~0.6 ms and ~2 MiB), the usual request, as fast as ever. A longer body
is walked by :func:`scan`, once, left to right, from one *token* to the next — a string
or a bracket — found by ``bytes.find`` (memchr: everything between tokens, text, numbers
and whitespace, passes at C speed), keeping only the depth. A string at depth 1 (or at
depth 2 inside an object named in ``nested``) followed by ``:`` is a key; the values of
the keys asked for are kept as their raw bytes, at most :data:`VALUE_BYTES` of each, and
decoded alone. Nothing else is built, and the body is never copied.

Bounds: at most :data:`SCAN_TOKENS` tokens (strings, brackets, escaped quotes) are walked;
then the walk stops and the fields not yet seen stay unknown. So a body costs the proxy at
most ~10 ms of its loop (measured: ``benchmarks/hostile_proxy.py``, ``proxy-request-scan``)
and a few KiB of memory beyond itself, whatever its shape or size. Duplicate keys: the
last one read wins (as orjson's). The walk does not validate JSON: a body that is not
JSON gives the fields a reader can see in it, or none — it is the client's own row that
shows them, and a client could send any value for them anyway.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from tui.proxy import routes

try:
    from orjson import loads as json_loads
except ImportError:  # pragma: no cover - a dependency
    from json import loads as json_loads  # type: ignore[assignment]

WHOLE_PARSE_BYTES: Final = 64 * 1024  # a body this short is parsed whole
SCAN_TOKENS: Final = 32_768  # strings and brackets walked in one body, at most
VALUE_BYTES: Final = 4096  # raw bytes kept of one value asked for
TEXT_CHARS: Final = 200  # characters kept of one text value
KEY_BYTES: Final = 64  # a key longer than this is none asked for
_WS: Final = b" \t\r\n"
_WS_PEEK: Final = 64  # whitespace looked past between a key and its colon, at most
_SCALAR: Final = re.compile(rb"[^,}\]\s]*")
_QUOTE, _LBRACKET, _RBRACKET, _LBRACE, _RBRACE, _BACKSLASH, _COLON = 34, 91, 93, 123, 125, 92, 58

Scanned = dict[str, bytes]  # "model" / "metadata.user_id" -> the value's raw bytes


@dataclass(frozen=True, slots=True)
class Found:
    """Fields found in a body: their values, and whether the whole body was read (False:
    the walk stopped at its bound, and a field not found may come after)."""

    values: dict[str, Any]
    whole: bool = True


def _skip_ws(body: bytes, p: int) -> int:
    """The first position at or after ``p`` that is not whitespace, looking at most
    :data:`_WS_PEEK` bytes ahead (past that: the position after them)."""
    seg = body[p : p + _WS_PEEK]
    return p + len(seg) - len(seg.lstrip(_WS))


def _backslashes_before(body: bytes, e: int, lo: int) -> int:
    """How many backslashes come right before ``body[e]``, not looking before ``lo``: by
    windows of at most 4 KiB (C speed over a hostile run of any length, a few KiB
    copied at a time; every run precedes its own quote, so all runs together cost at
    most one pass over the body)."""
    run, w = 0, 16
    while True:
        a = max(lo, e - w)
        seg = body[a:e]
        k = len(seg) - len(seg.rstrip(b"\\"))
        run += k
        if k < len(seg) or a == lo:
            return run
        e, w = a, min(w * 4, 4096)


def scan(
    body: bytes,
    keys: frozenset[str],
    nested: Mapping[str, frozenset[str]] | None = None,
    tokens: int = SCAN_TOKENS,
) -> tuple[Scanned, bool] | None:
    """The raw values of ``keys`` of the body's top-level object, and of ``nested[k]``
    inside its object ``k`` (as ``"k.name"``), and whether the walk reached the object's
    end; None when the body is not an object (see the module docstring). A string value
    is kept with its quotes; one longer than :data:`VALUE_BYTES` is kept cut (no closing
    quote); a container value is kept only when it is at most that long."""
    n = len(body)
    start = _skip_ws(body, 0)
    if start >= n or body[start] != _LBRACE:
        return None
    inner = nested or {}
    out: Scanned = {}
    find = body.find
    q = find(b'"', start)
    ob = find(b"[", start)
    cb = find(b"]", start)
    oc = find(b"{", start)
    cc = find(b"}", start)
    q, ob, cb, oc, cc = (x if x >= 0 else n for x in (q, ob, cb, oc, cc))
    depth = 0
    top = ""  # the depth-1 key whose value the walk is in
    opened: list[tuple[str, int, int]] = []  # container values asked for: path, start, depth
    left = tokens
    while left > 0:
        left -= 1
        t = min(q, ob, cb, oc, cc)
        if t >= n:
            break
        c = body[t]
        if c == _QUOTE:
            p = t + 1
            while True:  # the string's end: a quote after an even run of backslashes
                e = find(b'"', p)
                if e < 0 or body[e - 1] != _BACKSLASH or not _backslashes_before(body, e, p) % 2:
                    break
                left -= 1
                if left <= 0:
                    return out, False
                p = e + 1
            if e < 0:
                break
            pos = e + 1
            if depth == 1 or (depth == 2 and top in inner):
                k = _skip_ws(body, pos)
                if k < n and body[k] == _COLON:
                    name = body[t + 1 : e].decode("latin-1") if e - t - 1 <= KEY_BYTES else ""
                    if depth == 1:
                        top = name
                    if name and name in (keys if depth == 1 else inner[top]):
                        path = name if depth == 1 else f"{top}.{name}"
                        v = _skip_ws(body, k + 1)
                        first = body[v] if v < n else 0
                        if first == _QUOTE:
                            out[path] = _string_value(body, v)
                        elif first in (_LBRACKET, _LBRACE):
                            opened.append((path, v, depth))
                        else:
                            m = _SCALAR.match(body, v, min(n, v + VALUE_BYTES))
                            out[path] = m[0] if m else b""
        elif c == _LBRACKET or c == _LBRACE:
            depth += 1
            pos = t + 1
        else:
            depth -= 1
            pos = t + 1
            if opened and depth == opened[-1][2]:
                path, v, _d = opened.pop()
                if pos - v <= VALUE_BYTES:
                    out[path] = body[v:pos]
            if depth <= 0:
                return out, True
        if q < pos:
            q = find(b'"', pos)
            q = q if q >= 0 else n
        if ob < pos:
            ob = find(b"[", pos)
            ob = ob if ob >= 0 else n
        if cb < pos:
            cb = find(b"]", pos)
            cb = cb if cb >= 0 else n
        if oc < pos:
            oc = find(b"{", pos)
            oc = oc if oc >= 0 else n
        if cc < pos:
            cc = find(b"}", pos)
            cc = cc if cc >= 0 else n
    return out, False


def _string_value(body: bytes, v: int) -> bytes:
    """The raw string starting at ``body[v]`` (a quote), with its quotes; cut to
    :data:`VALUE_BYTES` (no closing quote) when longer."""
    p = v + 1
    limit = v + VALUE_BYTES
    while True:
        e = body.find(b'"', p, limit)
        if e < 0:
            return body[v:limit]
        if body[e - 1] != _BACKSLASH or not _backslashes_before(body, e, p) % 2:
            return body[v : e + 1]
        p = e + 1


def text(raw: bytes | None, chars: int = TEXT_CHARS) -> str | None:
    """A string value's text, at most ``chars`` characters; None when it is no string.
    A value cut by :func:`scan` is read up to its cut (an escape or a character cut in
    two there is left out)."""
    if raw is None or raw[:1] != b'"':
        return None
    whole = (
        len(raw) >= 2 and raw.endswith(b'"') and _backslashes_before(raw, len(raw) - 1, 1) % 2 == 0
    )
    for drop in range(0, 1 if whole else 8):
        try:
            value = json_loads(raw if whole else raw[: len(raw) - drop] + b'"')
        except ValueError:
            continue
        return value[:chars] if isinstance(value, str) else None
    return None


def flag(raw: bytes | None) -> bool | None:
    """A ``true`` or ``false`` value; None for anything else."""
    if raw == b"true":
        return True
    if raw == b"false":
        return False
    return None


def small_json(raw: bytes | None) -> Any:
    """A value kept whole by :func:`scan`, parsed (at most :data:`VALUE_BYTES` bytes);
    None when it is missing, cut or not JSON."""
    if raw is None:
        return None
    try:
        return json_loads(raw)
    except (ValueError, RecursionError):
        return None


_MISSING = object()


def _decoded(raw: bytes) -> Any:
    """A raw value kept by :func:`scan`: a string's text (at most :data:`VALUE_BYTES`
    characters), else the JSON value; _MISSING when it cannot be read."""
    if raw[:1] == b'"':
        value = text(raw, VALUE_BYTES)
        return _MISSING if value is None else value
    if raw in (b"", b"-"):
        return _MISSING
    try:
        return json_loads(raw)
    except (ValueError, RecursionError):
        return _MISSING


def fields(
    body: bytes, keys: frozenset[str], nested: Mapping[str, frozenset[str]] | None = None
) -> Found | None:
    """The values of ``keys`` of the body's top-level object, and of ``nested[k]`` inside
    its object ``k`` (as ``"k.name"``); None when the body is no JSON object (see the
    module docstring: parsed whole up to :data:`WHOLE_PARSE_BYTES`, else scanned)."""
    inner = nested or {}
    if len(body) <= WHOLE_PARSE_BYTES:
        try:
            obj = json_loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict):
            return None
        out = {k: obj[k] for k in keys if k in obj}
        for k, names in inner.items():
            sub = obj.get(k)
            if isinstance(sub, dict):
                out.update((f"{k}.{name}", sub[name]) for name in names if name in sub)
        return Found(out)
    scanned = scan(body, keys, inner)
    if scanned is None:
        return None
    raw, whole = scanned
    decoded = {k: _decoded(v) for k, v in raw.items()}
    return Found({k: v for k, v in decoded.items() if v is not _MISSING}, whole)


REQUEST_KEYS: Final = frozenset({"model", "stream", "user", "metadata"})
REQUEST_NESTED: Final = {"metadata": frozenset({"user_id"})}


@dataclass(frozen=True, slots=True)
class RequestFields:
    """What the proxy reads of a generation request's body (None: not said, or not
    read): ``model``, ``stream`` (Ollama's routes stream unless told not to), and who
    sent it — OpenAI's ``user``, else Anthropic's ``metadata.user_id`` — each text at
    most :data:`TEXT_CHARS` characters."""

    model: str | None
    stream: bool | None
    user: str | None


UNREAD: Final = RequestFields(None, None, None)


def _text(v: Any) -> str | None:
    return v[:TEXT_CHARS] if isinstance(v, str) else None


def request_fields(body: bytes, path: str) -> RequestFields:
    """The :class:`RequestFields` of a generation request's body (a body that is no JSON
    object: none)."""
    found = fields(body, REQUEST_KEYS, REQUEST_NESTED) if body else None
    if found is None:
        return UNREAD
    got = found.values
    stream = got.get("stream")
    if not isinstance(stream, bool):  # not said: the route's default (unless unread)
        stream = routes.streams_by_default(path) if found.whole else None
    user = _text(got.get("user")) or _text(got.get("metadata.user_id"))
    return RequestFields(_text(got.get("model")), stream, user)
