"""From the body bytes of a response passing through to the stream events of its request.

An observer reads a copy of what is forwarded (already passed on: it never holds bytes
back) and feeds the request's record (:class:`~tui.proxy.record.ProxiedRequest`) with
the same decoders infertop's own engines use (tui/engines/dialects), chosen by the
request's route and the answer's content type:

- ``text/event-stream``: the route's dialect — OpenAI chat or text completions, the
  Responses API, Anthropic Messages, llama-server's ``/completion`` (reasoning, answer
  and tool calls apart; usage counts; llama-server's ``timings`` become the engine's
  report);
- ``application/x-ndjson`` (Ollama): one object per line (``eval_count`` and the
  durations of the ``done`` line);
- ``application/json`` (an answer not streamed, embeddings, reranking): read whole, up to
  :data:`WHOLE_LIMIT` bytes (:mod:`tui.engines.dialects.whole`); its text is one chunk
  at the time the body ended (so its TTFT is its e2e, and the view shows none). An
  embeddings or rerank answer (its vectors up to 16 MiB) is not parsed: only its counts
  are read (:data:`PROMPT_ONLY_KEYS`, by :func:`tui.proxy.body_scan.fields`);
- an error status: the server's own message, from up to 64 KiB of the body.

gzip and deflate bodies are inflated for reading, at most :data:`WHOLE_LIMIT` bytes out
of any one read; a body that inflates past that, or an answer read whole past it, is no
longer read (the request's note says so; it is still forwarded whole). An observer that
cannot understand the bytes says why once (the request is then failed with kind
"protocol", or "engine" for an error the server put in the stream) and stops reading;
forwarding never depends on it.
"""

from __future__ import annotations

import zlib
from typing import Any

from tui.core.events import EngineReport, EngineTruth, Failed, Finished, FirstByte
from tui.engines.dialects import decoder_for, whole_answer
from tui.engines.dialects.base import CUT_SHORT, model_name
from tui.engines.dialects.errors import StreamProtocolError, StreamServerError
from tui.engines.dialects.fields import OLLAMA_FINAL
from tui.engines.dialects.kinds import streamed_as
from tui.engines.dialects.llama import timings_events
from tui.engines.http.openai_compat import USAGE_CACHED_SOURCE
from tui.proxy.body_scan import fields
from tui.proxy.record import ProxiedRequest
from tui.transport.http_head import ResponseHead
from tui.transport.http_io import ERROR_BODY_LIMIT, error_message_from_body
from tui.transport.sse import EventTooLarge

try:
    from orjson import loads as json_loads
except ImportError:  # pragma: no cover - a dependency
    from json import loads as json_loads  # type: ignore[assignment]

WHOLE_LIMIT = 16 * 1024 * 1024
# Dialects whose answers carry no text, only counts (a vector or a ranking per input)
PROMPT_ONLY = frozenset({"embeddings", "rerank"})
# What is read of such an answer: its usage, an error, Ollama's counts and durations
PROMPT_ONLY_KEYS = frozenset({"usage", "error", "type", *OLLAMA_FINAL})


class Observer:
    """Reads one response body (de-chunked) for its record; see the module docstring."""

    def __init__(self, record: ProxiedRequest) -> None:
        self.record = record
        self.first = True
        self.off = False  # stopped: not understood, or nothing to read

    def feed(self, t_ns: int, data: bytes) -> None:
        """Body bytes that arrived at ``t_ns`` (never raises: a fault stops observing)."""
        if self.off:
            return
        if self.first:
            self.first = False
            self.record.emit(FirstByte(t_ns))
        try:
            self.read(t_ns, data)
        except Exception as e:  # noqa: BLE001 - whatever the bytes were, forwarding goes on
            self.stop(e)

    def end(self, t_ns: int) -> None:
        """The body ended normally at ``t_ns`` (its last read): the closing events."""
        if self.off:
            if not self.record.ended:
                self.record.emit(Finished(t_ns, "stop"))
            return
        try:
            self.close(t_ns)
        except Exception as e:  # noqa: BLE001
            self.stop(e)
        if not self.record.ended:
            self.record.emit(Finished(t_ns, "stop"))

    def stop(self, e: BaseException) -> None:
        self.off = True
        if isinstance(e, StreamServerError):
            self.record.fail(str(e), "engine")
        elif isinstance(e, StreamProtocolError | EventTooLarge):
            self.record.fail(f"not understood: {e}", "protocol")
        else:
            self.record.fail(f"not understood: {type(e).__name__}: {e}", "protocol")

    def read(self, t_ns: int, data: bytes) -> None:
        raise NotImplementedError

    def close(self, t_ns: int) -> None:
        """The last events (default: none; :meth:`end` adds Finished)."""

    @property
    def complete(self) -> bool:
        """The stream said it is over (``[DONE]`` or a finish reason, Ollama's ``done``,
        llama-server's ``stop``): a client that hangs up now has its whole answer (the
        openai SDK closes the connection on ``[DONE]``, before the body's last chunk)."""
        return False


class Inflating(Observer):
    """Inflates a gzip or deflate body for the observer it wraps."""

    def __init__(self, inner: Observer) -> None:
        super().__init__(inner.record)
        self.inner = inner
        self.first = False  # the inner one stamps the first byte
        self.z = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header, detected

    def read(self, t_ns: int, data: bytes) -> None:
        out = self.z.decompress(data, WHOLE_LIMIT)
        if self.z.unconsumed_tail:  # a compression bomb: forwarded, not read
            self.off = True
            self.record.note = f"a read inflates past {WHOLE_LIMIT} bytes: not read"
            return
        if out:
            self.inner.feed(t_ns, out)
        self.off = self.inner.off

    def close(self, t_ns: int) -> None:
        self.inner.end(t_ns)

    @property
    def complete(self) -> bool:
        return self.inner.complete


class Streamed(Observer):
    """A streamed answer, read by its dialect's decoder (tui/engines/dialects)."""

    def __init__(self, record: ProxiedRequest, dialect: str) -> None:
        super().__init__(record)
        self.decoder = decoder_for(dialect)

    def read(self, t_ns: int, data: bytes) -> None:
        self.decoder.feed(data, t_ns, self.record.emit)

    @property
    def complete(self) -> bool:
        return self.decoder.complete or self.decoder.finish_reason is not None

    def close(self, t_ns: int) -> None:
        dec, emit = self.decoder, self.record.emit
        dec.close(t_ns, emit)
        self.record.response_model = dec.response_model
        t_end = dec.last_t_ns or t_ns
        reported = timings_events(dec, t_end)
        for ev in reported:
            emit(ev)
        if dec.cached_tokens is not None and not any(isinstance(e, EngineReport) for e in reported):
            # the usage's cached prompt tokens (OpenAI's prompt_tokens_details, the Responses
            # API's input_tokens_details, Anthropic's cache_read_input_tokens), as the
            # engines keep them: the engine's account of this request's prefix cache
            truth = EngineTruth(cached_tokens=dec.cached_tokens, source=USAGE_CACHED_SOURCE)
            emit(EngineReport(t_end, truth))
        end = dec.end(t_ns)
        if isinstance(end, Failed):
            self.record.fail(CUT_SHORT, "protocol", t_end)
        else:
            emit(end)


class WholeBody(Observer):
    """A body read whole: an answer not streamed (``error``: an error status's body)."""

    def __init__(self, record: ProxiedRequest, dialect: str, error: bool = False) -> None:
        super().__init__(record)
        self.dialect = dialect
        self.error = error
        self.limit = ERROR_BODY_LIMIT if error else WHOLE_LIMIT
        self.parts: list[bytes] = []
        self.size = 0
        self.content_type = ""

    def read(self, t_ns: int, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            if self.error:
                return  # the first 64 KiB say what went wrong
            self.off = True  # still forwarded whole: only not read
            self.parts = []
            self.record.note = f"an answer larger than {self.limit} bytes: not read"
            return
        self.parts.append(data)

    def close(self, t_ns: int) -> None:
        body, self.parts = b"".join(self.parts), []
        if len(body) > self.limit:
            body = body[: self.limit]
        if self.error:
            msg = error_message_from_body(body, self.content_type)
            self.record.fail(f"HTTP {self.record.status}: {msg}", "http", t_ns)
            return
        if self.dialect in PROMPT_ONLY:
            found = fields(body, PROMPT_ONLY_KEYS)
            obj = None if found is None else found.values
        else:
            obj = json_loads(body)
        if not isinstance(obj, dict):
            raise StreamProtocolError("the answer is not a JSON object")
        if obj.get("error") or obj.get("type") == "error":
            raise StreamServerError(_error_text(obj, body, self.dialect not in PROMPT_ONLY))
        self.record.response_model = model_name(obj.get("model"))
        whole_answer(self.dialect, obj, t_ns, self.record.emit)


def _error_text(obj: dict[str, Any], body: bytes, whole: bool) -> str:
    """The server's message for an error in an answer's body: from the body parsed
    whole (``whole``), else from the fields read of it (an error's text, or its
    ``message``; else the body's first 64 KiB, as words)."""
    if whole:
        return error_message_from_body(body, "json")
    err = obj.get("error")
    if isinstance(err, dict):
        err = err.get("message")
    if isinstance(err, str) and err:
        return err
    return error_message_from_body(body[:ERROR_BODY_LIMIT], "text")


def observer_for(record: ProxiedRequest, head: ResponseHead, dialect: str) -> Observer:
    """The observer for a response to a generation request (see the module docstring)."""
    ctype = (head.get(b"content-type") or b"").decode("latin-1").lower()
    obs: Observer
    if head.status >= 400:
        errors = WholeBody(record, dialect, error=True)
        errors.content_type = ctype
        obs = errors
    elif "event-stream" in ctype:
        obs = Streamed(record, streamed_as(dialect, "sse").name)
    elif "ndjson" in ctype:
        obs = Streamed(record, streamed_as(dialect, "ndjson").name)
    elif "json" in ctype:
        obs = WholeBody(record, dialect)
    else:
        obs = Observer(record)
        obs.off = True
        record.note = f"content type {ctype[:60] or '(none)'!r}: not read"
    coding = (head.get(b"content-encoding") or b"identity").decode("latin-1").strip().lower()
    if coding in ("gzip", "x-gzip", "deflate") and not obs.off:
        return Inflating(obs)
    if coding not in ("identity", "", "gzip", "x-gzip", "deflate"):
        record.note = f"content-encoding {coding[:20]!r}: not read"
        obs.off = True
    return obs
