"""The engine interface every backend implements, and the values it exchanges."""

from __future__ import annotations

import abc
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tui.core.cancel import CancelToken
from tui.core.events import Failed, RequestSent, StreamEvent
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


class Engine(abc.ABC):
    """A backend that streams stamped events for a generation request.

    Lifecycle: ``await load()`` (cold start; returns load time in ms), any number of
    ``stream()`` calls, ``await close()``. ``stream`` yields RequestSent first and ends
    with exactly one Finished or Failed; it never raises for engine faults — a fault is a
    Failed event, so what streamed before it is kept.
    """

    kind: ClassVar[str]

    def __init__(self, spec: EngineSpec) -> None:
        self.spec = spec

    @abc.abstractmethod
    async def load(self) -> float:
        """Make the engine ready; return the cold load time in milliseconds."""

    @abc.abstractmethod
    def stream(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Answer ``request``, yielding events stamped where they happened."""

    async def stream_batches(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[list[StreamEvent]]:
        """:meth:`stream`, in lists of events that became available together (the bench's
        way in: one step per list, not per event). Engines that relay events from another
        thread in batches override it; by default each event is a list of its own."""
        async for event in self.stream(request, cancel):
            yield [event]

    async def stream_into(
        self,
        request: GenerationRequest,
        cancel: CancelToken | None,
        sink: Callable[[StreamEvent], None],
    ) -> None:
        """:meth:`stream_batches`, each event passed to ``sink`` as it comes (the bench's
        way in). Engines that can hand events over without a queue override it."""
        async with aclosing(self.stream_batches(request, cancel)) as batches:  # type: ignore[type-var]
            async for batch in batches:
                for event in batch:
                    sink(event)

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


class BatchedEngine(Engine):
    """An engine whose events come in batches (handed over from another thread or
    process together): it implements :meth:`stream_batches`; :meth:`stream` flattens it."""

    async def stream(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        async with aclosing(self.stream_batches(request, cancel)) as batches:  # type: ignore[type-var]
            async for batch in batches:
                for event in batch:
                    yield event

    @abc.abstractmethod
    def stream_batches(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[list[StreamEvent]]:
        """Answer ``request``, yielding lists of events that became available together."""
