"""HTTP plumbing below the engines: timeouts, stamped body reads, error bodies.

Honest timing: all HTTP reads run on one daemon thread with its own asyncio loop
(:class:`~tui.transport.reader_loop.HttpReader`). Bytes are stamped with
``time.perf_counter_ns()`` in that loop the moment a read returns (plain http:// streams:
at the kernel's receive time, see tui/transport/http1.py; httpx for the rest), parsed
there into stream events, and handed to the consumer's loop in batches, one cross-thread
wake-up per loop turn. A consumer that is slow to take events (a busy UI frame, a blocking
callback) delays when it *sees* an event, never the stamp the event carries
(tests/http/test_openai_pace.py). One limit remains: a consumer that keeps the CPU busy in
Python holds the GIL, and the reader thread waits up to ``sys.getswitchinterval()`` to
stamp; that adds jitter to single gaps, not drift to the mean
(benchmarks/http_consumer_skew.py measures it).

Timeouts (see :class:`HttpTimeouts`): ``connect`` for the TCP/TLS connection, ``read``
for the response to begin (headers and the first body bytes: covers queueing and
prefill), ``stall`` for any gap between body reads after that.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

ERROR_BODY_LIMIT = 64 * 1024
WHOLE_BODY_LIMIT = 16 * 1024 * 1024  # a response read whole: model lists, metrics pages


@dataclass(frozen=True)
class HttpTimeouts:
    """Seconds: connect, response start (read), gap between body reads (stall)."""

    connect: float
    read: float
    stall: float

    @property
    def whole(self) -> float:
        """Seconds a response read whole (a small JSON answer, an error page) may take
        from the request to its last byte: connect + read."""
        return self.connect + self.read

    @classmethod
    def from_spec(cls, spec: Any) -> HttpTimeouts:
        """From an engine spec's connect/read/stall timeouts (``stall`` defaults to read)."""
        stall = spec.stall_timeout_s or spec.read_timeout_s
        return cls(spec.connect_timeout_s, spec.read_timeout_s, stall)


class StallTimeout(Exception):
    """No body bytes for longer than the stall timeout."""


class EventStalled(StallTimeout):
    """Bytes keep coming, but one streamed event (or line) stayed unfinished for longer
    than the stall timeout: a server dripping an endless event."""


class EventDeadline:
    """The stall timeout, for one event: a streamed event's bytes must all come within
    ``stall_s`` of its first byte (a real server writes an event at once; a drip of one
    byte a second would otherwise never stall). Fed with each read's stamp, how many bytes
    of an unfinished event the decoder holds after it, and whether the read completed
    an event (then what is held began in this read)."""

    __slots__ = ("limit_ns", "stall_s", "since")

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self.limit_ns = int(stall_s * 1e9)
        self.since: int | None = None  # stamp of the read that began the unfinished event

    def check(self, t_ns: int, pending: int, completed: bool) -> None:
        """EventStalled when the unfinished event is older than the stall timeout."""
        if not pending:
            self.since = None
        elif completed or self.since is None:
            self.since = t_ns
        elif t_ns - self.since > self.limit_ns:
            raise EventStalled()


# What reading from a server can raise when the *transport* fails (either client): an
# engine turns these into Failed events with describe_transport_error. Anything else is a
# bug and is left to surface as one.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.HTTPError,
    OSError,
    TimeoutError,
    StallTimeout,
)


ERROR_MESSAGE_CHARS = 300  # the most of a server's error text kept (one line of a screen)


def error_message_from_body(body: bytes, content_type: str) -> str:
    """The server's own error text from an error response body (JSON or plain).

    On one line (runs of whitespace made one space) and at most
    :data:`ERROR_MESSAGE_CHARS` characters, whether it came from a JSON error object or
    from plain text: a server's message is shown, logged and kept in records.
    """
    text = body.decode("utf-8", errors="replace").strip()
    if "json" in content_type or text.startswith("{"):
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
            obj = None
        msg = _one_line(_find_message(obj) or "")
        if msg:
            return msg
    if "html" in content_type or text.lower().startswith(("<!doctype", "<html")):
        return "(an HTML page, not an API error: is this an LLM server?)"
    return _one_line(text) or "(empty body)"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:ERROR_MESSAGE_CHARS]


def _find_message(obj: Any, depth: int = 0) -> str | None:
    if isinstance(obj, str):
        return obj
    if depth > 8:  # {"error": {"error": ...}} 10,000 deep is no server's error
        return None
    if isinstance(obj, dict):
        for key in ("error", "message", "detail", "msg"):
            if key in obj:
                found = _find_message(obj[key], depth + 1)
                if found:
                    return found
    if isinstance(obj, list) and obj:
        return _find_message(obj[0], depth + 1)
    return None


async def read_error_body(
    resp: httpx.Response, stall: float, into: list[bytes] | None = None
) -> bytes:
    """Up to ERROR_BODY_LIMIT bytes of an error body (httpx); faults end it quietly.
    ``into``: a list the parts are appended to as they come."""
    parts: list[bytes] = [] if into is None else into
    size = 0
    try:
        async for part in _with_stall(resp.aiter_raw(), stall):
            parts.append(part)
            size += len(part)
            if size >= ERROR_BODY_LIMIT:
                break
    except (httpx.HTTPError, StallTimeout):
        pass
    return b"".join(parts)


@dataclass(frozen=True)
class WholeResponse:
    """A response read to its end (a small JSON answer, a metrics page), from either client."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class ResponseHead(Protocol):
    """What the error wording needs of a response (httpx's or http1's)."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...


async def _with_stall(it: AsyncIterator[bytes], stall: float) -> AsyncIterator[bytes]:
    """Re-yield ``it``, raising StallTimeout when one read waits longer than ``stall``."""
    while True:
        try:
            part = await asyncio.wait_for(it.__anext__(), stall)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise StallTimeout() from None
        yield part


async def stamped_body(
    resp: httpx.Response, timeouts: HttpTimeouts
) -> AsyncIterator[tuple[int, bytes]]:
    """Body bytes as they arrive, each with the perf_counter_ns of its arrival.

    The first read may wait ``timeouts.read`` (a server can send headers before it has
    prefilled); every later read may wait ``timeouts.stall``.
    """
    it = resp.aiter_bytes()
    first = True
    while True:
        try:
            part = await asyncio.wait_for(
                it.__anext__(), timeouts.read if first else timeouts.stall
            )
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            if first:
                raise httpx.ReadTimeout("no body within the read timeout") from None
            raise StallTimeout() from None
        t = time.perf_counter_ns()
        first = False
        if part:
            yield t, part
