"""infertop's spans in OTLP's protobuf wire format, written directly: the bytes of an
``ExportTraceServiceRequest`` (opentelemetry-proto 1.x: ``collector/trace/v1``,
``trace/v1``, ``common/v1``, ``resource/v1``) without a message object in between.

Why: the SDK's exporter turns a span into protobuf objects first — a ``KeyValue`` and an
``AnyValue`` per attribute, ~25 a span — and that was ~95 µs of the export thread's
~255 µs per request (benchmarks/otel_overhead.py). Our spans have one fixed shape
(:class:`~tui.otel.spans.SpanData`: a CLIENT span, its ids, two stamps, attributes,
a status; no events, links or trace state), so their bytes are written here, field by
field, as the SDK's encoder would fill the message for the same span
(``opentelemetry.exporter.otlp.proto.common``'s ``encode_spans`` of the
``ReadableSpan`` tui/otel/export.py would make): tests/otel/test_otlp_wire.py decodes
both with ``opentelemetry-proto`` and holds them equal, message for message.

What is written, in field-number order (proto3: a zero scalar is left out; a oneof
member and a set sub-message are written even when empty):

- ``ExportTraceServiceRequest``: one ``ResourceSpans`` (1): the resource (1: its
  attributes), one ``ScopeSpans`` (2: the scope — name, version — (1), the spans (2), the
  scope's schema URL (3)), and the resource's schema URL (3) when it has one.
- ``Span``: trace_id (1, 16 bytes), span_id (2, 8 bytes), parent_span_id (4) when it
  has a parent, name (5), kind (6: ``SPAN_KIND_CLIENT`` = 3), start and end (7, 8:
  fixed64 epoch ns), attributes (9), status (15: message (2) and code (3), ``ERROR`` = 2;
  an empty message when unset), flags (16, fixed32: ``HAS_IS_REMOTE`` 0x100, and
  ``IS_REMOTE`` 0x200 when the parent is a client's span from another process).
- an attribute: ``KeyValue`` — key (1), ``AnyValue`` (2): string (1), bool (2), int (3,
  int64), double (4, little-endian IEEE 754), an array (5) of ``AnyValue``, or bytes (7).

A string that is not valid UTF-8 as Python holds it (a lone surrogate, which JSON's
``\\ud800`` escapes can make) is written with ``?`` in its place: protobuf strings must
be UTF-8, and one hostile model name must not cost a batch. An int outside int64 or a
value of another type leaves that attribute out (as the SDK's encoder does).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Final

from tui.otel.spans import SpanData

SPAN_KIND_CLIENT: Final = 3
STATUS_CODE_ERROR: Final = 2
FLAG_HAS_IS_REMOTE: Final = 0x100  # SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
FLAG_IS_REMOTE: Final = 0x200  # SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
CACHED_PAIRS: Final = 4096  # (key, value) attribute encodings kept (names, kinds, routes)
CACHED_CHARS: Final = 256  # a longer string value is not kept
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1

_double = struct.Struct("<d").pack
_fixed64 = struct.Struct("<Q").pack
_fixed32 = struct.Struct("<I").pack
_SMALL = [bytes([n]) for n in range(128)]
_KIND_CLIENT: Final = b"\x30" + bytes([SPAN_KIND_CLIENT])
_STATUS_UNSET: Final = b"\x7a\x00"  # a set, empty Status
_FLAGS_LOCAL: Final = b"\x85\x01" + _fixed32(FLAG_HAS_IS_REMOTE)
_FLAGS_REMOTE_PARENT: Final = b"\x85\x01" + _fixed32(FLAG_HAS_IS_REMOTE | FLAG_IS_REMOTE)


def varint(n: int) -> bytes:
    """A non-negative integer (< 2**64) as a protobuf varint."""
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the length, the payload."""
    return tag + varint(len(payload)) + payload


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: not UTF-8
        return text.encode("utf-8", "replace")


def any_value(value: object) -> bytes:
    """An ``AnyValue`` message's bytes; TypeError / ValueError for what OTLP cannot hold
    here (another type, an int outside int64)."""
    if value is True:
        return b"\x10\x01"
    if value is False:
        return b"\x10\x00"
    if isinstance(value, str):
        return _field(b"\x0a", _utf8(value))
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{value} is outside int64")
        return b"\x18" + varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _double(value)
    if isinstance(value, bytes):
        return _field(b"\x3a", value)
    if isinstance(value, list | tuple):
        return _field(b"\x2a", b"".join(_field(b"\x0a", any_value(v)) for v in value))
    raise TypeError(f"an attribute of type {type(value).__name__}")


def _double_head(tag: bytes, key: str) -> bytes:
    """A double attribute's ``KeyValue`` field with ``tag`` up to the value's 8 bytes (its
    length does not depend on the value)."""
    key_field = _field(b"\x0a", _utf8(key))
    return tag + varint(len(key_field) + 11) + key_field + b"\x12\x09\x21"


def key_value(key: str, value: object) -> bytes:
    """A ``KeyValue`` message's bytes."""
    return _field(b"\x0a", _utf8(key)) + _field(b"\x12", any_value(value))


_NONE: Final[dict[str, bytes]] = {}  # (never filled: a key with no value kept yet)


class _Kept:
    """One field tag's kept encodings (at most :data:`CACHED_PAIRS` of each kind; then
    they start afresh): ``KeyValue`` fields by key and string value (a string longer
    than :data:`CACHED_CHARS` is not kept), by (key, type, value) for ints and bools
    (``b""``: an int outside int64, left out), and a double's head by key."""

    __slots__ = ("tag", "strings", "n_strings", "pairs", "double_heads")

    def __init__(self, tag: bytes) -> None:
        self.tag = tag
        self.strings: dict[str, dict[str, bytes]] = {}
        self.n_strings = 0
        self.pairs: dict[tuple[str, type, object], bytes] = {}
        self.double_heads: dict[str, bytes] = {}

    def string(self, key: str, value: str) -> bytes:
        encoded = _field(self.tag, key_value(key, value))
        if len(value) <= CACHED_CHARS:
            if self.n_strings >= CACHED_PAIRS:
                self.strings.clear()
                self.n_strings = 0
            self.strings.setdefault(key, {})[value] = encoded
            self.n_strings += 1
        return encoded

    def scalar(self, key: str, kind: type, value: object) -> bytes:
        try:
            encoded = _field(self.tag, key_value(key, value))
        except ValueError:  # outside int64
            encoded = b""
        if len(self.pairs) >= CACHED_PAIRS:
            self.pairs.clear()
        self.pairs[(key, kind, value)] = encoded
        return encoded

    def double_head(self, key: str) -> bytes:
        if len(self.double_heads) >= CACHED_PAIRS:
            self.double_heads.clear()
        head = self.double_heads[key] = _double_head(self.tag, key)
        return head


class TraceEncoder:
    """Spans to the bytes of one ``ExportTraceServiceRequest`` (the module docstring),
    for one resource and one instrumentation scope, encoded once here. Used from one
    thread (the exporter's)."""

    def __init__(
        self,
        resource_attributes: Mapping[str, object],
        scope_name: str,
        scope_version: str,
        scope_schema_url: str = "",
        resource_schema_url: str = "",
    ) -> None:
        # per field tag (a resource's attributes and a span's are different fields)
        self._kept: dict[bytes, _Kept] = {}
        self._names: dict[str, bytes] = {}  # span names' fields (few: operation, model)
        resource = self.attributes(b"\x0a", resource_attributes)
        scope = _field(b"\x0a", _utf8(scope_name))
        if scope_version:
            scope += _field(b"\x12", _utf8(scope_version))
        self._scope_head = _field(b"\x0a", scope)
        self._scope_tail = _field(b"\x1a", _utf8(scope_schema_url)) if scope_schema_url else b""
        self._resource_head = _field(b"\x0a", resource)
        self._resource_tail = (
            _field(b"\x1a", _utf8(resource_schema_url)) if resource_schema_url else b""
        )

    def attributes(self, tag: bytes, attributes: Mapping[str, object]) -> bytes:
        """Each attribute as a ``KeyValue`` field with ``tag``, in the mapping's order;
        one OTLP cannot hold is left out. The encodings of repeated (key, value) pairs —
        names, kinds, routes, small counts — are kept and reused (:class:`_Kept`), and a
        double's is its key's kept head and its 8 bytes."""
        kept = self._kept.get(tag)
        if kept is None:
            kept = self._kept[tag] = _Kept(tag)
        strings, heads, pairs = kept.strings, kept.double_heads, kept.pairs
        out = []
        for key, value in attributes.items():
            kind = type(value)
            if kind is str:
                found = strings.get(key, _NONE).get(value)  # type: ignore[call-overload]
                if found is None:
                    found = kept.string(key, value)  # type: ignore[arg-type]
                out.append(found)
            elif kind is float:
                head = heads.get(key)
                if head is None:
                    head = kept.double_head(key)
                out.append(head + _double(value))
            elif kind is bool or kind is int:
                found = pairs.get((key, kind, value))
                if found is None:
                    found = kept.scalar(key, kind, value)
                if found:
                    out.append(found)
            else:  # a list, bytes, a str or float subclass; what OTLP cannot hold: b""
                try:
                    out.append(_field(tag, key_value(key, value)))
                except (TypeError, ValueError):
                    continue
        return b"".join(out)

    def span(self, span: SpanData) -> bytes:
        """One ``Span`` message's bytes; ``span`` must have its ids (hex)."""
        if span.trace_id is None or span.span_id is None:
            raise ValueError("a span needs its trace and span ids")
        name = self._names.get(span.name)
        if name is None:
            name = _field(b"\x2a", _utf8(span.name))
            if len(span.name) <= CACHED_CHARS:
                if len(self._names) >= CACHED_PAIRS:
                    self._names.clear()
                self._names[span.name] = name
        if span.status == "error":
            status = b""
            if span.status_message:
                status += _field(b"\x12", _utf8(span.status_message))
            status = _field(b"\x7a", status + b"\x18" + varint(STATUS_CODE_ERROR))
        else:
            status = _STATUS_UNSET
        return b"".join(
            (
                b"\x0a\x10",
                bytes.fromhex(span.trace_id),
                b"\x12\x08",
                bytes.fromhex(span.span_id),
                b"\x22\x08" + bytes.fromhex(span.parent_id) if span.parent_id else b"",
                name,
                _KIND_CLIENT,
                b"\x39",
                _fixed64(span.start_ns),
                b"\x41",
                _fixed64(span.end_ns),
                self.attributes(b"\x4a", span.attributes),
                status,
                _FLAGS_REMOTE_PARENT if span.parent_id else _FLAGS_LOCAL,
            )
        )

    def request(self, spans: Sequence[bytes]) -> bytes:
        """The ``ExportTraceServiceRequest`` of encoded spans (:meth:`span`)."""
        scope_spans = (
            self._scope_head + b"".join([_field(b"\x12", s) for s in spans]) + self._scope_tail
        )
        resource_spans = self._resource_head + _field(b"\x12", scope_spans) + self._resource_tail
        return _field(b"\x0a", resource_spans)
