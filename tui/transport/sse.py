"""Incremental decoders for streamed HTTP bodies: Server-Sent Events and NDJSON.

Both take bytes exactly as they arrive (any split, even inside a UTF-8 character or a
line ending) and return the complete items found so far. They never see a clock: the
caller stamps the bytes when it reads them and gives every item parsed from those bytes
that stamp, which is when the item became available to the client.

SSE follows the WHATWG "event stream" rules that matter for LLM servers: lines end in
CRLF, LF or CR; a line starting with ``:`` is a comment; ``field: value`` strips one
space after the colon; a line without a colon is a field with an empty value; ``data``
lines of one event are joined with ``\\n``; a blank line dispatches the event; an event
with no data is not dispatched. ``id`` and ``retry`` are kept but unused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched Server-Sent Event."""

    data: str
    event: str = "message"
    id: str | None = None


class _LineSplitter:
    """Bytes in, complete text lines out (CRLF, LF or CR end a line).

    Works on bytes (``bytes.split``, no per-character loop); a complete line is decoded
    as UTF-8 on its own (a line ending never falls inside a multi-byte character), bad
    bytes become U+FFFD.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._pending_cr = False  # the last read ended in CR: a leading LF belongs to it

    def feed(self, data: bytes) -> list[str]:
        if not data:  # nothing new: a pending CR still waits for the LF that may follow it
            return []
        if self._pending_cr:
            self._pending_cr = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            self._pending_cr = data[-1:] == b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in data:
            self._buf += data
            return []
        parts = (self._buf + data).split(b"\n")
        self._buf = parts.pop()
        return [p.decode("utf-8", "replace") for p in parts]

    @property
    def remainder(self) -> str:
        """Text after the last line ending (an unfinished line)."""
        return self._buf.decode("utf-8", "replace")


# One event of the usual shape; its payload has no line end (8 = the bytes around it)
_DATA_EVENT = re.compile(rb"data: ([^\n]*)\n\n")


class SSEDecoder:
    """Feed bytes, get the events completed by them."""

    def __init__(self) -> None:
        self._lines = _LineSplitter()
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        # feed_payloads' fast path: the raw bytes of an unfinished event, or None while
        # the line-by-line rules hold state (a split line, a CR, an event's fields)
        self._raw: bytes | None = b""

    def feed(self, data: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        if self._raw:  # bytes held by feed_payloads' fast path
            data, self._raw = self._raw + data, b""
        for line in self._lines.feed(data):
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        return out

    def feed_payloads(self, data: bytes) -> list[bytes]:
        """Like :meth:`feed`, but only each event's data, as UTF-8 bytes (the hot path).

        Events of the usual shape, ``data: <payload>`` and a blank line, with LF line
        ends, are cut out of the buffer in one pass (a slice when the bytes are exactly one
        such event, one regex ``findall`` when the buffer holds nothing else, else
        ``bytes.split``; no per-line decoding). Anything else
        (CR line ends, comments, other fields, multi-line data) goes through the full
        rules, and the fast path resumes once they hold no state.
        """
        raw = self._raw
        if (
            raw == b""
            and data.startswith(b"data: ")
            and data.endswith(b"\n\n")
            and data.find(b"\n") == len(data) - 2
            and data.find(b"\r") < 0  # (faster than "in": no TypeError made and dropped)
        ):
            return [data[6:-2]]  # exactly one whole event: one token per read
        if raw is None or data.find(b"\r") >= 0:
            if raw:
                data = raw + data
            out = [d.encode() for d in self._feed_lines(data)]
            lines = self._lines
            clean = not (lines._buf or lines._pending_cr or self._data or self._event)
            self._raw = b"" if clean else None
            return out
        buf = raw + data if raw else data
        cut = buf.rfind(b"\n\n") + 2  # the end of the last complete event
        if cut > 1:
            whole = buf[:cut] if cut < len(buf) else buf
            found: list[bytes] = _DATA_EVENT.findall(whole)
            if len(whole) == 8 * len(found) + sum(map(len, found)):
                # the events tile the buffer: every one is "data: <payload>\n\n"
                self._raw = buf[cut:]
                return found
        events = buf.split(b"\n\n")
        self._raw = events.pop()  # after the last blank line: an unfinished event
        out = []
        for ev in events:
            if ev[:6] == b"data: " and b"\n" not in ev:
                out.append(ev[6:])
            else:  # this event, and the blank line that ended it, by the full rules
                out.extend(d.encode() for d in self._feed_lines(ev + b"\n\n"))
        return out

    def feed_data(self, data: bytes) -> list[str]:
        """Like :meth:`feed_payloads`, as text."""
        return [d.decode("utf-8", "replace") for d in self.feed_payloads(data)]

    def _feed_lines(self, data: bytes) -> list[str]:
        """Each event's data by the line rules (a ``data:`` line and a blank line per event
        inline, anything else by :meth:`_line`)."""
        out: list[str] = []
        for line in self._lines.feed(data):
            if line.startswith("data: "):
                self._data.append(line[6:])
            elif line or not self._data:
                self._line(line)
            else:  # a blank line ends an event that has data
                out.append(self._data[0] if len(self._data) == 1 else "\n".join(self._data))
                self._data = []
                self._event = ""
        return out

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            ev = SSEEvent("\n".join(self._data), self._event or "message", self._id)
            self._data = []
            self._event = ""
            return ev
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # "retry" and unknown fields are ignored, as the spec says

    def close(self) -> list[SSEEvent]:
        """End of body: the event left unfinished, if any.

        The spec drops an event that is not followed by a blank line; servers that end
        the body right after the last ``data:`` line exist, so such an event is returned
        here and the caller decides what it means.
        """
        out: list[SSEEvent] = []
        if self._raw:  # an unfinished event held by feed_payloads' fast path
            raw, self._raw = self._raw, b""
            out += [SSEEvent(d, "message", self._id) for d in self._feed_lines(raw)]
        rest = self._lines.remainder
        if rest:
            ev = self._line(rest)
            if ev is not None:
                out.append(ev)
        if self._data:
            out.append(SSEEvent("\n".join(self._data), self._event or "message", self._id))
            self._data = []
        return out


class NDJSONDecoder:
    """Feed bytes, get complete JSON lines (as text; blank lines skipped)."""

    def __init__(self) -> None:
        self._lines = _LineSplitter()

    def feed(self, data: bytes) -> list[str]:
        return [ln for ln in self._lines.feed(data) if ln.strip()]

    def close(self) -> str:
        """The unfinished last line (no newline at the end of the body), or ''."""
        return self._lines.remainder.strip()
