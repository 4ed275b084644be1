"""The engine interface every backend implements, and the values it exchanges."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from tui.core.cancel import CancelToken
from tui.core.events import Failed, Finished, RequestSent, StreamEvent
from tui.core.outcome import Where
from tui.core.trace_context import TraceContext
from tui.transport.access import split_credentials


class EngineError(Exception):
    """An engine could not do what was asked; the message is meant for the user."""


@dataclass
class EngineSpec:
    """How to reach or start one engine, as written in config (``[engines.NAME]``)."""

    name: str
    kind: str
    model: str | None = None  # GGUF path ("default" = the embedded model) or model name
    url: str | None = None
    n_ctx: int = 2048
    n_threads: int | None = None
    n_gpu_layers: int = 0
    api_key_env: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    verify_tls: bool = True
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    stall_timeout_s: float | None = None  # HTTP: longest gap between body reads (None: read)
    # "chat" (/v1/chat/completions), "completions" or "responses" (the Responses API)
    endpoint: str = "chat"
    options: dict[str, Any] = field(default_factory=dict)  # passed through to the engine
    telemetry: str | None = None  # whose hardware the panel shows (tui/telemetry/sources.py)

    def __post_init__(self) -> None:
        """Credentials in the URL become an Authorization header (a header's value is
        never shown), so the URL kept here — in names, reports, logs, errors — is clean."""
        if not self.url or "@" not in self.url:
            return
        try:
            clean, auth = split_credentials(self.url)
        except ValueError:
            return  # not a URL at all: the engine says so when it is used
        self.url = clean
        has_auth = any(k.lower() == "authorization" for k in self.headers)
        if auth and not has_auth and not self.api_key_env:
            self.headers = {**self.headers, "Authorization": auth}


@dataclass
class GenerationRequest:
    """One prompt to answer. ``messages`` are OpenAI-style chat messages."""

    messages: list[dict[str, str]]
    max_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int | None = None
    cache_prompt: bool = True  # False: no prefix-cache reuse (fair, cold prefill)
    ignore_eos: bool = False  # True: generate exactly max_tokens where supported
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # what the bench asked of this prompt's length in the engine's tokens (never sent;
    # the report sets it beside the engine's count)
    prompt_tokens_target: int | None = None
    # its span's trace context (tui/core/trace_context.py), where OTLP export or trace
    # propagation is on; ``send_traceparent``: an HTTP engine sends it as ``traceparent``
    trace: TraceContext | None = None
    send_traceparent: bool = False

    @classmethod
    def from_prompt(cls, prompt: str, **kw: Any) -> GenerationRequest:
        return cls(messages=[{"role": "user", "content": prompt}], **kw)

    def validate(self) -> None:
        """Raise EngineError on a request no engine should be sent."""
        if not self.messages or not any(m.get("content", "").strip() for m in self.messages):
            raise EngineError("the prompt is empty")
        if self.max_tokens < 1:
            raise EngineError(f"max tokens must be at least 1 (got {self.max_tokens})")
        if self.temperature < 0:
            raise EngineError(f"temperature must be >= 0 (got {self.temperature})")

    def params(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "cache_prompt": self.cache_prompt,
            "ignore_eos": self.ignore_eos,
        }


@dataclass
class EngineInfo:
    """What an engine is running, for the engine bar and reports."""

    engine: str
    kind: str
    model: str
    quantisation: str | None = None
    context_size: int | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    load_ms: float | None = None
    pid: int | None = None  # the process doing the work (for RSS telemetry)
    url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def refused(message: str) -> tuple[RequestSent, Failed]:
    """The whole stream of a request an engine will not send (a bad request, no model):
    RequestSent then Failed, stamped together, so the stream contract holds."""
    now = time.perf_counter_ns()
    return RequestSent(now), Failed(now, message, "engine")


NOT_ENFORCED = "not enforced"


def controls_from_body(body: dict[str, Any]) -> dict[str, str]:
    """The fairness controls as an HTTP engine's request body carries them."""
    cache = body.get("cache_prompt")
    return {
        "cache_prompt": f"sent (cache_prompt: {str(cache).lower()})"
        if cache is not None
        else f"{NOT_ENFORCED}: the request carries no prefix-cache control",
        "ignore_eos": "sent (ignore_eos: true)"
        if body.get("ignore_eos")
        else f"{NOT_ENFORCED}: the request carries no ignore_eos",
    }


EventSink = Callable[[StreamEvent], None]
END_EVENTS = (Finished, Failed)  # the events that end a stream: exactly one, last


class EventSource(Protocol):
    """The one way from an engine to whoever consumes its events (the chat's engine
    host, the bench, ``infertop run``, the worker process for an engine it hosts).

    ``stream_into`` answers ``request``: RequestSent first, then every event in order,
    each handed to ``sink`` as it becomes available to this process, ending with exactly
    one Finished or Failed. ``sink`` is called on the caller's event loop (on the HTTP
    reader's loop when the caller runs there: then from the read callback itself, no
    queue between). It never raises for an engine fault: a fault is a Failed event, so
    what streamed before it is kept (:func:`stream_guarded` holds a consumer to that
    even when an engine breaks it)."""

    async def stream_into(
        self, request: GenerationRequest, cancel: CancelToken | None, sink: EventSink
    ) -> None: ...


class ThreadSink(Protocol):
    """Where an engine's generation thread puts its events (a Handoff, or the worker
    process's frames to infertop); ``put`` is called from that thread."""

    def put(self, item: Any) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class ThreadSource(Protocol):
    """The in-process side's entry point, inside the worker process that runs an engine:
    an engine whose events can leave from its generation thread itself (llama.cpp), each
    put into ``out`` as it is stamped, then ``out.close()``; no event-loop hop between.
    An engine without it is read by :meth:`EventSource.stream_into` there too."""

    async def generate_into(
        self, request: GenerationRequest, cancel: CancelToken, out: ThreadSink
    ) -> None: ...


class Engine(abc.ABC):
    """A backend that streams stamped events for a generation request.

    Lifecycle: ``await load()`` (cold start; returns load time in ms), any number of
    :meth:`stream_into` calls (the :class:`EventSource` entry point), ``await close()``.
    Engines written as async generators derive from :class:`GeneratorEngine`.
    """

    kind: ClassVar[str]

    def __init__(self, spec: EngineSpec) -> None:
        self.spec = spec

    @abc.abstractmethod
    async def load(self) -> float:
        """Make the engine ready; return the cold load time in milliseconds."""

    @abc.abstractmethod
    async def stream_into(
        self, request: GenerationRequest, cancel: CancelToken | None, sink: EventSink
    ) -> None:
        """Answer ``request``, each event to ``sink`` (see :class:`EventSource`)."""

    async def stream(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`stream_into`'s events as an iterator (for tests and tools; infertop's
        consumers pass a sink). Leaving early cancels the stream."""
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()

        async def run() -> None:
            try:
                await self.stream_into(request, cancel, queue.put_nowait)
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(run())
        try:
            while (event := await queue.get()) is not None:
                yield event
            await task  # an engine that raised: raise here too
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    @abc.abstractmethod
    def info(self) -> EngineInfo:
        """Engine, model, quantisation, context size and parameters."""

    def where(self, model: str | None = None) -> Where:
        """Where its requests go, as a finished request's outcome names it
        (tui/core/outcome.py): an in-process engine's route and api are its kind, its
        upstream "in-process"; ``model``: the model it runs (else the spec's)."""
        return Where(self.kind, self.kind, "in-process", model or self.spec.model, self.kind)

    @classmethod
    def fixed_controls(cls, request: GenerationRequest) -> dict[str, str] | None:
        """For engines that apply ``cache_prompt``/``ignore_eos`` themselves (in-process):
        how, in words. None: see :meth:`request_controls`."""
        return None

    def request_controls(self, request: GenerationRequest) -> dict[str, str]:
        """How this engine applies ``request.cache_prompt`` and ``request.ignore_eos``:
        {control: "sent …" | "enforced: …" | "not enforced: …"}, from what it really does
        (HTTP engines: what their request body carries). The bench's fairness notes."""
        fixed = self.fixed_controls(request)
        if fixed is not None:
            return fixed
        return {
            "cache_prompt": f"{NOT_ENFORCED}: this engine has no per-request control",
            "ignore_eos": f"{NOT_ENFORCED}: this engine has no per-request control",
        }

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model or connections."""


class GeneratorEngine(Engine):
    """An engine written as an async generator of its events (:meth:`events`), on the
    caller's loop; :meth:`stream_into` hands each to the sink as it is yielded."""

    @abc.abstractmethod
    def events(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Answer ``request``, yielding events stamped where they happened."""

    async def stream_into(
        self, request: GenerationRequest, cancel: CancelToken | None, sink: EventSink
    ) -> None:
        async with aclosing(self.events(request, cancel)) as events:  # type: ignore[type-var]
            async for event in events:
                sink(event)

    def stream(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        return self.events(request, cancel)


class EndGuard:
    """A sink that holds a stream to its contract: it passes events on, and :meth:`close`
    adds the Failed a stream that ended without Finished or Failed owes its consumer;
    :meth:`raised` turns an engine's exception into the Failed it should have been."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink
        self.ended = False

    def __call__(self, event: StreamEvent) -> None:
        self.ended = self.ended or isinstance(event, END_EVENTS)
        self.sink(event)

    def raised(self, e: BaseException) -> None:
        """An engine raised (engines should not; if one does, it is a Failed)."""
        self(Failed(time.perf_counter_ns(), f"{type(e).__name__}: {e}", "engine"))

    def close(self) -> None:
        if not self.ended:
            self(Failed(time.perf_counter_ns(), "the stream ended without a finish", "protocol"))


async def stream_guarded(
    engine: EventSource, request: GenerationRequest, cancel: CancelToken | None, sink: EventSink
) -> None:
    """``engine.stream_into`` with its end guaranteed: an exception of the engine becomes a
    Failed ("engine"), a stream that ended without Finished or Failed gets one
    ("protocol"). Cancelling the awaiting task still cancels."""
    guard = EndGuard(sink)
    try:
        await engine.stream_into(request, cancel, guard)
    except Exception as e:  # noqa: BLE001 - engines should not raise; if one does, Failed
        guard.raised(e)
    guard.close()
