"""Any OpenAI-compatible server: streaming /v1/chat/completions, /v1/completions or
/v1/responses (the Responses API: ``endpoint = "responses"``).

Chat and completions requests ask for ``stream_options.include_usage`` so the server
counts the tokens; a Responses stream ends with its usage in ``response.completed``. A
role-only or empty first chunk is not a token (it becomes no TextChunk; its bytes still
mark TTFR). When the server sends no usage, no Usage event is emitted and the metrics
label the token count as an estimate. Payloads are read by the wire format's decoder
(tui/engines/dialects), the same the proxy uses. Server-specific engines (llama-server,
vLLM, Anthropic's API) subclass :class:`OpenAICompatEngine` and override the small hooks
at the bottom.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from tui.core.events import EngineReport, EngineTruth, Failed, StreamEvent
from tui.engines.base import (
    EngineError,
    EngineInfo,
    EngineSpec,
    GenerationRequest,
)
from tui.engines.dialects import Dialect, DialectName, dialect_named
from tui.engines.dialects.base import StreamDecoder
from tui.engines.http.http_engine import HttpStreamEngine

USAGE_CACHED_SOURCE = "usage: cached prompt tokens"
ENDPOINTS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "responses": "/v1/responses",
}
# the dialect of each endpoint's answers (tui/engines/dialects/kinds.py)
ENDPOINT_DIALECTS: dict[str, DialectName] = {
    "chat": "openai-chat",
    "completions": "openai-completions",
    "responses": "openai-responses",
}


def listed_context_size(listed: list[dict[str, Any]], model: str | None) -> int | None:
    """The context size /v1/models gives for ``model``: vLLM lists ``max_model_len`` on
    each model; None when the entry or the field is missing (most servers)."""
    for m in listed:
        if str(m["id"]) == model:
            n = m.get("max_model_len")
            return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None
    return None


class OpenAICompatEngine(HttpStreamEngine):
    """Streams from an OpenAI-compatible server (see the module docstring)."""

    kind: ClassVar[str] = "openai"
    endpoints: ClassVar[tuple[str, ...]] = tuple(ENDPOINTS)

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        if spec.endpoint not in self.endpoints:
            raise EngineError(
                f"engine {spec.name!r}: endpoint must be "
                + " or ".join(repr(e) for e in self.endpoints)
                + f" (got {spec.endpoint!r})"
            )
        self.context_size: int | None = None  # from /v1/models, where the server says

    # --- lifecycle -------------------------------------------------------------------

    async def load(self) -> float:
        """Check the server answers and learn its models; returns that time in ms.

        A server is already running, so this is readiness, not a model load.
        """
        t0 = time.perf_counter_ns()
        await self.reader.call(self._prepare())
        self.load_ms = (time.perf_counter_ns() - t0) / 1e6
        return self.load_ms

    def info(self) -> EngineInfo:
        return EngineInfo(
            engine=self.spec.name,
            kind=self.kind,
            model=self.model or "(server default)",
            parameters={"endpoint": self.spec.endpoint},
            load_ms=self.load_ms,
            url=self.base,
            pid=self.spec.options.get("pid"),
            context_size=self.context_size,
        )

    async def _prepare(self) -> None:
        """Reader loop: make the client, list models, pick one when none is configured,
        and take the model's context size where the listing gives it (vLLM's
        ``max_model_len``)."""
        data = await self.request_json("GET", "/v1/models")
        try:
            listed = [m for m in data.get("data", []) if isinstance(m, dict) and "id" in m]
        except (AttributeError, TypeError):
            raise EngineError(f"{self.base}/v1/models did not return a model list") from None
        self.server_models = [str(m["id"]) for m in listed]
        if not self.model and self.server_models:
            self.model = self.server_models[0]
        self.context_size = listed_context_size(listed, self.model)

    # --- streaming -------------------------------------------------------------------

    async def before_stream(self) -> None:
        if self.model is None and not self.server_models:
            try:
                await self._prepare()
            except EngineError:
                pass  # the request itself will report what is wrong

    def stream_url(self) -> str:
        return self.url_for(self.spec.endpoint)

    def url_for(self, endpoint: str) -> str:
        return self.base + ENDPOINTS.get(endpoint, ENDPOINTS["chat"])

    def dialect(self) -> Dialect:
        return dialect_named(ENDPOINT_DIALECTS.get(self.spec.endpoint, "openai-chat"))

    # --- hooks for server-specific engines -------------------------------------------

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body. Only standard OpenAI fields here (strict servers reject others)."""
        if self.spec.endpoint == "responses":
            return self.responses_body(request)
        body: dict[str, Any] = {
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if self.spec.endpoint == "chat":
            body["messages"] = request.messages
        else:
            # Raw completion: the message contents, joined; no chat template is applied.
            body["prompt"] = "\n".join(m.get("content", "") for m in request.messages)
        return self.finish_body(body)

    def responses_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The Responses API's body: the conversation as ``input``, its own name for the
        length cap (``max_output_tokens``); it has no ``seed`` and no stream options."""
        body: dict[str, Any] = {
            "stream": True,
            "input": request.messages,
            "max_output_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
        }
        return self.finish_body(body)

    def finish_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """Every API's body ends the same: the model, when one is named, then the config's
        ``extra_body`` over it all (the user's word wins)."""
        if self.model:
            body["model"] = self.model
        extra = self.spec.options.get("extra_body")
        if isinstance(extra, dict):
            body.update(extra)
        return body

    async def before_request(self) -> Any:
        """Reader loop, before RequestSent: gather what ``finish`` compares against."""
        return None

    def engine_truth(self, state: StreamDecoder, context: Any) -> EngineTruth | None:
        """The server's own numbers for this request, if it gives any: here how much of
        the prompt it read from its cache, where its usage says (chat:
        ``prompt_tokens_details.cached_tokens``; the Responses API:
        ``input_tokens_details.cached_tokens``; Anthropic: ``cache_read_input_tokens``),
        so a bench can tell a cold prefill from a reused one."""
        if state.cached_tokens is None:
            return None
        return EngineTruth(cached_tokens=state.cached_tokens, source=USAGE_CACHED_SOURCE)

    async def finish(self, state: StreamDecoder, context: Any) -> list[StreamEvent]:
        """Reader loop, after the body ended (its Usage already emitted): EngineReport,
        then Finished, or Failed when the server never said the answer was over."""
        end = state.end(time.perf_counter_ns())
        if isinstance(end, Failed):
            return [end]
        truth = await self.truth_after(state, context)
        if truth is not None:
            return [EngineReport(end.t_ns, truth), end]
        return [end]

    async def truth_after(self, state: StreamDecoder, context: Any) -> EngineTruth | None:
        return self.engine_truth(state, context)
