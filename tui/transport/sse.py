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


EVENT_LIMIT = 16 * 1024 * 1024
"""Bytes one SSE event or NDJSON line may hold before the stream is refused.

The largest real events are a final chunk that carries a whole answer with logprobs
(a 4,000-token answer with 20 top logprobs per token is ~5 MB of JSON) and Ollama's
last line on ``/api/generate``, whose ``context`` array lists every token id of the
context (~7 MB for a million tokens); 16 MiB holds either with room. An endless line
stops there: memory stays bounded, and every byte is copied a bounded number of times
(the unfinished part is kept in pieces and joined once, when it ends)."""


class EventTooLarge(ValueError):
    """An SSE event or NDJSON line grew past its limit without ending."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an event (or line) longer than {limit} bytes, still unfinished")
        self.limit = limit


class _LineSplitter:
    """Bytes in, complete text lines out (CRLF, LF or CR end a line).

    Works on bytes (``bytes.split``, no per-character loop); a complete line is decoded
    as UTF-8 on its own (a line ending never falls inside a multi-byte character), bad
    bytes become U+FFFD. An unfinished line is held in pieces and joined once, when its
    end comes (so a line that arrives in many reads costs linear time); one longer than
    ``limit`` bytes raises :class:`EventTooLarge`.
    """

    def __init__(self, limit: int = EVENT_LIMIT) -> None:
        self.limit = limit
        self._held: list[bytes] = []  # the unfinished line, in pieces
        self.held_len = 0
        self._pending_cr = False  # the last read ended in CR: a leading LF belongs to it

    @property
    def holding(self) -> bool:
        """Bytes of an unfinished line, or a CR whose LF may follow, are held."""
        return bool(self._held) or self._pending_cr

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
            self._hold(data)
            return []
        if self._held:
            data = b"".join(self._held) + data
            self._held, self.held_len = [], 0
        parts = data.split(b"\n")
        self._hold(parts.pop())
        return [p.decode("utf-8", "replace") for p in parts]

    def _hold(self, data: bytes) -> None:
        if data:
            self._held.append(data)
            self.held_len += len(data)
            if self.held_len > self.limit:
                raise EventTooLarge(self.limit)

    @property
    def remainder(self) -> str:
        """Text after the last line ending (an unfinished line)."""
        return b"".join(self._held).decode("utf-8", "replace")


# One event of the usual shape; its payload has no line end (8 = the bytes around it)
_DATA_EVENT = re.compile(rb"data: ([^\n]*)\n\n")


class SSEDecoder:
    """Feed bytes, get the events completed by them. An event that grows past
    ``limit`` bytes without ending raises :class:`EventTooLarge`."""

    def __init__(self, limit: int = EVENT_LIMIT) -> None:
        self.limit = limit
        self._lines = _LineSplitter(limit)
        self._data: list[str] = []
        self._data_len = 0
        self._event = ""
        self._id: str | None = None
        # feed_payloads' fast path: the raw bytes of an unfinished event, in pieces
        # (joined once, when the event can end); by_lines while the line-by-line rules
        # hold state (a split line, a CR, an event's fields)
        self._held: list[bytes] = []
        self._held_len = 0
        self._by_lines = False

    @property
    def pending(self) -> int:
        """Bytes held of an unfinished event (0: none)."""
        return self._held_len + self._lines.held_len + self._data_len

    def feed(self, data: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        if self._held:  # bytes held by feed_payloads' fast path
            data = self._take_held() + data
        for line in self._lines.feed(data):
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        self._check()
        return out

    def feed_payloads(self, data: bytes) -> list[bytes]:
        """Like :meth:`feed`, but only each event's data, as UTF-8 bytes (the hot path).

        Events of the usual shape, ``data: <payload>`` and a blank line, with LF line
        ends, are cut out of the buffer in one pass (a slice when the bytes are exactly one
        such event, one regex ``findall`` when the buffer holds nothing else, else
        ``bytes.split``; no per-line decoding). Anything else
        (CR line ends, comments, other fields, multi-line data) goes through the full
        rules, and the fast path resumes once they hold no state. Bytes that cannot end
        the unfinished event are only held (no copy of what came before).
        """
        if (
            not self._held
            and not self._by_lines
            and data.startswith(b"data: ")
            and data.endswith(b"\n\n")
            and data.find(b"\n") == len(data) - 2
            and data.find(b"\r") < 0  # (faster than "in": no TypeError made and dropped)
        ):
            return [data[6:-2]]  # exactly one whole event: one token per read
        if self._by_lines or data.find(b"\r") >= 0:
            if self._held:
                data = self._take_held() + data
            out = [d.encode() for d in self._feed_lines(data)]
            self._by_lines = bool(self._lines.holding or self._data or self._event)
            self._check()
            return out
        if self._held:
            # the held bytes end with no blank line: only a blank line in this read, or
            # a line end here that completes one the held bytes began, can end the event
            if data.find(b"\n\n") < 0 and not (data[:1] == b"\n" and self._held[-1][-1:] == b"\n"):
                self._hold(data)
                self._check()
                return []
            buf = self._take_held() + data
        else:
            buf = data
        cut = buf.rfind(b"\n\n") + 2  # the end of the last complete event
        if cut > 1:
            whole = buf[:cut] if cut < len(buf) else buf
            found: list[bytes] = _DATA_EVENT.findall(whole)
            if len(whole) == 8 * len(found) + sum(map(len, found)):
                # the events tile the buffer: every one is "data: <payload>\n\n"
                self._hold(buf[cut:])
                self._check()
                return found
        events = buf.split(b"\n\n")
        self._hold(events.pop())  # after the last blank line: an unfinished event
        out = []
        for ev in events:
            if ev[:6] == b"data: " and b"\n" not in ev:
                out.append(ev[6:])
            else:  # this event, and the blank line that ended it, by the full rules
                out.extend(d.encode() for d in self._feed_lines(ev + b"\n\n"))
        self._check()
        return out

    def _hold(self, data: bytes) -> None:
        if data:
            self._held.append(data)
            self._held_len += len(data)

    def _check(self) -> None:
        """EventTooLarge when the unfinished event holds more than the limit."""
        if self._held_len + self._lines.held_len + self._data_len > self.limit:
            raise EventTooLarge(self.limit)

    def _take_held(self) -> bytes:
        held = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held, self._held_len = [], 0
        return held

    def feed_data(self, data: bytes) -> list[str]:
        """Like :meth:`feed_payloads`, as text."""
        return [d.decode("utf-8", "replace") for d in self.feed_payloads(data)]

    def _add_data(self, value: str) -> None:
        self._data.append(value)
        self._data_len += len(value) + 1
        if self._data_len > self.limit:  # (one read of many lines: before they all add up)
            raise EventTooLarge(self.limit)

    def _dispatched(self) -> str:
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        self._data, self._data_len = [], 0
        self._event = ""
        return data

    def _feed_lines(self, data: bytes) -> list[str]:
        """Each event's data by the line rules (a ``data:`` line and a blank line per event
        inline, anything else by :meth:`_line`)."""
        out: list[str] = []
        for line in self._lines.feed(data):
            if line.startswith("data: "):
                self._add_data(line[6:])
            elif line or not self._data:
                self._line(line)
            else:  # a blank line ends an event that has data
                out.append(self._dispatched())
        return out

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            event = self._event or "message"
            return SSEEvent(self._dispatched(), event, self._id)
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._add_data(value)
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
        if self._held:  # an unfinished event held by feed_payloads' fast path
            raw = self._take_held()
            out += [SSEEvent(d, "message", self._id) for d in self._feed_lines(raw)]
        rest = self._lines.remainder
        if rest:
            ev = self._line(rest)
            if ev is not None:
                out.append(ev)
        if self._data:
            event = self._event or "message"
            out.append(SSEEvent(self._dispatched(), event, self._id))
        return out


class NDJSONDecoder:
    """Feed bytes, get complete JSON lines (as text; blank lines skipped). A line that
    grows past ``limit`` bytes without ending raises :class:`EventTooLarge`."""

    def __init__(self, limit: int = EVENT_LIMIT) -> None:
        self._lines = _LineSplitter(limit)

    @property
    def pending(self) -> int:
        """Bytes held of an unfinished line (0: none)."""
        return self._lines.held_len

    def feed(self, data: bytes) -> list[str]:
        return [ln for ln in self._lines.feed(data) if ln.strip()]

    def close(self) -> str:
        """The unfinished last line (no newline at the end of the body), or ''."""
        return self._lines.remainder.strip()
