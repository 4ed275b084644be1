"""From the body bytes of a response passing through to the stream events of its request.

An observer reads a copy of what is forwarded (already passed on: it never holds bytes
back) and feeds the request's record (:class:`~tui.proxy.record.ProxiedRequest`) with
the same parsers infertop's own engines use:

- ``text/event-stream`` from the OpenAI API: :class:`~tui.engines.openai_stream.
  OpenAIStreamState` per ``data:`` payload (role-only chunks are no token; ``usage``
  counts; llama-server's ``timings`` become the engine's report);
- ``text/event-stream`` from llama-server's own ``/completion``: ``content`` per payload,
  ``tokens_predicted`` / ``tokens_evaluated`` and ``timings`` on the last (``stop``);
- ``application/x-ndjson`` (Ollama): :func:`~tui.engines.ollama.read_line` per line
  (``eval_count`` and the durations of the ``done`` line);
- ``application/json`` (an answer not streamed): read whole, up to
  :data:`WHOLE_LIMIT` bytes; its text is one chunk at the time the body ended (so its
  TTFT is its e2e, and the view shows none);
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

from tui.core.events import EngineReport, Finished, FirstByte, TextChunk, Usage
from tui.engines.llama_server import truth_from_timings
from tui.engines.ollama import StreamState, read_line, truth_from_final
from tui.engines.openai_stream import OpenAIStreamState, usage_event
from tui.engines.stream_errors import StreamProtocolError, StreamServerError
from tui.proxy.record import ProxiedRequest
from tui.transport.http_head import ResponseHead
from tui.transport.http_io import ERROR_BODY_LIMIT, error_message_from_body
from tui.transport.sse import EventTooLarge, NDJSONDecoder, SSEDecoder

try:
    from orjson import loads as json_loads
except ImportError:  # pragma: no cover - a dependency
    from json import loads as json_loads  # type: ignore[assignment]

WHOLE_LIMIT = 16 * 1024 * 1024
CUT_SHORT = "the stream ended before the server finished (the connection was closed mid-stream)"


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


class OpenAIEvents(Observer):
    """OpenAI-style SSE (chat or text completions)."""

    def __init__(self, record: ProxiedRequest, endpoint: str) -> None:
        super().__init__(record)
        self.decoder = SSEDecoder()
        self.state = OpenAIStreamState(endpoint)

    def read(self, t_ns: int, data: bytes) -> None:
        on_data, emit = self.state.on_data, self.record.emit
        for payload in self.decoder.feed_payloads(data):
            ev = on_data(payload, t_ns)
            if ev is not None:
                emit(ev)

    @property
    def complete(self) -> bool:
        return self.state.done or self.state.finish_reason is not None

    def close(self, t_ns: int) -> None:
        state, emit = self.state, self.record.emit
        for sse in self.decoder.close():
            ev = state.on_data(sse.data, t_ns)
            if ev is not None:
                emit(ev)
        if state.usage is not None:
            emit(usage_event(state))
        t_end = state.last_t_ns or t_ns
        timings = state.extra.get("timings")
        if isinstance(timings, dict):
            truth = truth_from_timings(timings, state.usage)
            if state.usage is None:  # the client asked for no usage: the engine's counts
                emit(Usage(t_end, truth.prompt_tokens, truth.output_tokens))
            emit(EngineReport(t_end, truth))
        if not state.done and state.finish_reason is None:
            self.record.fail(CUT_SHORT, "protocol", t_end)
        else:
            emit(Finished(t_end, state.finish_reason or "stop"))


class LlamaEvents(Observer):
    """llama-server's own ``/completion`` SSE: ``content`` per payload, ``stop`` last."""

    def __init__(self, record: ProxiedRequest) -> None:
        super().__init__(record)
        self.decoder = SSEDecoder()
        self.final: dict[str, Any] | None = None
        self.t_final = 0

    def read(self, t_ns: int, data: bytes) -> None:
        for payload in self.decoder.feed_payloads(data):
            self.payload(payload, t_ns)

    def payload(self, payload: bytes | str, t_ns: int) -> None:
        obj = json_loads(payload)
        if not isinstance(obj, dict):
            raise StreamProtocolError("a payload is not a JSON object")
        if obj.get("error"):
            raise StreamServerError(error_message_from_body(_bytes(payload), "json"))
        text = obj.get("content")
        if isinstance(text, str) and text:
            self.record.emit(TextChunk(t_ns, text, None))
        if obj.get("stop") is True:
            self.final, self.t_final = obj, t_ns

    @property
    def complete(self) -> bool:
        return self.final is not None

    def close(self, t_ns: int) -> None:
        for sse in self.decoder.close():
            self.payload(sse.data, t_ns)
        final = self.final
        if final is None:
            self.record.fail(CUT_SHORT, "protocol", t_ns)
            return
        emit_llama_final(self.record, final, self.t_final)
        reason = final.get("stop_type")
        self.record.emit(Finished(self.t_final, str(reason) if reason else "stop"))


class OllamaLines(Observer):
    """Ollama's NDJSON (``/api/chat``, ``/api/generate``)."""

    def __init__(self, record: ProxiedRequest) -> None:
        super().__init__(record)
        self.decoder = NDJSONDecoder()
        self.state = StreamState()

    def read(self, t_ns: int, data: bytes) -> None:
        state, emit = self.state, self.record.emit
        for line in self.decoder.feed(data):
            read_line(line, t_ns, state, emit)

    @property
    def complete(self) -> bool:
        return self.state.final is not None

    def close(self, t_ns: int) -> None:
        rest = self.decoder.close()
        if rest:
            read_line(rest, t_ns, self.state, self.record.emit)
        final = self.state.final
        if final is None:
            self.record.fail(CUT_SHORT, "protocol", t_ns)
            return
        reason = final.get("done_reason")
        t_end = self.state.final_t_ns or t_ns
        self.record.emit(Finished(t_end, str(reason) if reason else "stop"))


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
        body = b"".join(self.parts)[: self.limit]
        if self.error:
            msg = error_message_from_body(body, self.content_type)
            self.record.fail(f"HTTP {self.record.status}: {msg}", "http", t_ns)
            return
        obj = json_loads(body)
        if not isinstance(obj, dict):
            raise StreamProtocolError("the answer is not a JSON object")
        if obj.get("error"):
            raise StreamServerError(error_message_from_body(body, "json"))
        whole_answer(self.record, self.dialect, obj, t_ns)


def whole_answer(record: ProxiedRequest, dialect: str, obj: dict[str, Any], t_ns: int) -> None:
    """The events of one answer that was not streamed (text at ``t_ns``, counts, report)."""
    emit = record.emit
    if dialect == "ollama":
        msg = obj.get("message")
        text = msg.get("content") if isinstance(msg, dict) else obj.get("response")
        truth = truth_from_final(obj)
        emit(TextChunk(t_ns, text if isinstance(text, str) else "", truth.output_tokens))
        emit(Usage(t_ns, truth.prompt_eval_tokens, truth.output_tokens))
        emit(EngineReport(t_ns, truth))
        reason = obj.get("done_reason")
        emit(Finished(t_ns, str(reason) if reason else "stop"))
        return
    if dialect == "llama":
        text = obj.get("content")
        n = obj.get("tokens_predicted")
        emit(TextChunk(t_ns, text if isinstance(text, str) else "", _count(n)))
        emit_llama_final(record, obj, t_ns)
        reason = obj.get("stop_type")
        emit(Finished(t_ns, str(reason) if reason else "stop"))
        return
    state = OpenAIStreamState("completions" if dialect == "openai-completions" else "chat")
    choices = obj.get("choices")
    texts: list[str] = []
    reason = None
    for ch in choices if isinstance(choices, list) else []:
        if not isinstance(ch, dict):
            continue
        msg = ch.get("message")
        if isinstance(msg, dict):
            for key in ("reasoning_content", "reasoning", "content"):
                v = msg.get(key)
                if isinstance(v, str):
                    texts.append(v)
        elif isinstance(ch.get("text"), str):
            texts.append(ch["text"])
        reason = ch.get("finish_reason") or reason
    usage = obj.get("usage")
    if isinstance(usage, dict):
        state.usage, state.usage_t_ns = usage, t_ns
    ct = usage.get("completion_tokens") if isinstance(usage, dict) else None
    emit(TextChunk(t_ns, "".join(texts), _count(ct)))
    if state.usage is not None:
        emit(usage_event(state))
    timings = obj.get("timings")
    if isinstance(timings, dict):
        emit(EngineReport(t_ns, truth_from_timings(timings, state.usage)))
    emit(Finished(t_ns, str(reason) if reason else "stop"))


def emit_llama_final(record: ProxiedRequest, final: dict[str, Any], t_ns: int) -> None:
    """Counts and the engine's report from llama-server's last ``/completion`` object."""
    predicted = _count(final.get("tokens_predicted"))
    evaluated = _count(final.get("tokens_evaluated"))
    record.emit(Usage(t_ns, evaluated, predicted))
    timings = final.get("timings")
    if isinstance(timings, dict):
        usage = {"prompt_tokens": evaluated, "completion_tokens": predicted}
        record.emit(EngineReport(t_ns, truth_from_timings(timings, usage)))


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53 else None


def _bytes(data: bytes | str) -> bytes:
    return data if isinstance(data, bytes) else data.encode()


def observer_for(record: ProxiedRequest, head: ResponseHead, dialect: str) -> Observer:
    """The observer for a response to a generation request (see the module docstring)."""
    ctype = (head.get(b"content-type") or b"").decode("latin-1").lower()
    obs: Observer
    if head.status >= 400:
        errors = WholeBody(record, dialect, error=True)
        errors.content_type = ctype
        obs = errors
    elif "event-stream" in ctype:
        if dialect == "llama":
            obs = LlamaEvents(record)
        else:
            obs = OpenAIEvents(record, "completions" if dialect == "openai-completions" else "chat")
    elif "ndjson" in ctype:
        obs = OllamaLines(record)
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
