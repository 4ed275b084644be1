"""Any OpenAI-compatible server: streaming /v1/chat/completions or /v1/completions.

Requests ask for ``stream_options.include_usage`` so the server counts the tokens. A
role-only or empty first chunk is not a token (it becomes no TextChunk; its bytes still
mark TTFR). When the server sends no ``usage``, no Usage event is emitted and the metrics
label the token count as an estimate (payloads are parsed by tui/engines/openai_stream.py).
Server-specific engines (llama-server, vLLM)
subclass :class:`OpenAICompatEngine` and override the small hooks at the bottom.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx

from tui.core.events import (
    EngineReport,
    EngineTruth,
    Failed,
    Finished,
    FirstByte,
    RequestSent,
    StampSource,
    StreamEvent,
)
from tui.engines.base import (
    BatchedEngine,
    CancelToken,
    EngineError,
    EngineInfo,
    EngineSpec,
    GenerationRequest,
    controls_from_body,
    refused,
)
from tui.engines.http1 import (
    Http1Pool,
    Http1Response,
    error_body,
    fast_path_ok,
    post_json,
    stamp_source,
    stamped,
)
from tui.engines.http_common import (
    HttpTimeouts,
    api_key_from_env,
    base_url,
    describe_transport_error,
    http_status_failure,
    make_client,
    request_headers,
    wrong_content_failure,
)
from tui.engines.openai_stream import (
    OpenAIStreamState,
    StreamProtocolError,
    StreamServerError,
    usage_event,
)
from tui.engines.reader_loop import Emit, HttpReader, relay_batches
from tui.engines.sse import SSEDecoder


class OpenAICompatEngine(BatchedEngine):
    """Streams from an OpenAI-compatible server (see the module docstring)."""

    kind: ClassVar[str] = "openai"

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        self.base = base_url(spec)
        if spec.endpoint not in ("chat", "completions"):
            raise EngineError(
                f"engine {spec.name!r}: endpoint must be 'chat' or 'completions' "
                f"(got {spec.endpoint!r})"
            )
        self.timeouts = HttpTimeouts.from_spec(spec)
        self.reader = HttpReader.shared()
        self.model: str | None = spec.model
        self.server_models: list[str] = []
        self.load_ms: float | None = None
        self._client: httpx.AsyncClient | None = None
        self._pool: Http1Pool | None = None  # plain http://: the lean streaming client

    # --- lifecycle -------------------------------------------------------------------

    async def load(self) -> float:
        """Check the server answers and learn its models; returns that time in ms.

        A server is already running, so this is readiness, not a model load.
        """
        t0 = time.perf_counter_ns()
        await self.reader.call(self._prepare())
        self.load_ms = (time.perf_counter_ns() - t0) / 1e6
        return self.load_ms

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await self.reader.call(client.aclose())
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await self.reader.call(pool.aclose())  # its sockets are closed on return

    def info(self) -> EngineInfo:
        return EngineInfo(
            engine=self.spec.name,
            kind=self.kind,
            model=self.model or "(server default)",
            parameters={"endpoint": self.spec.endpoint},
            load_ms=self.load_ms,
            url=self.base,
            pid=self.spec.options.get("pid"),
        )

    async def _client_ready(self) -> httpx.AsyncClient:
        """The client (reader loop only)."""
        if self._client is None:
            key = api_key_from_env(self.spec)
            self._client = make_client(self.spec, key)
            if fast_path_ok(self.base):
                self._pool = Http1Pool(request_headers(self.spec, key), self.timeouts)
        return self._client

    async def _prepare(self) -> None:
        """Reader loop: make the client, list models, pick one when none is configured."""
        client = await self._client_ready()
        try:
            resp = await client.get(self.base + "/v1/models")
        except httpx.HTTPError as e:
            raise EngineError(
                describe_transport_error(e, self.base, self.timeouts).message
            ) from None
        if resp.status_code >= 400:
            raise EngineError(http_status_failure(resp, resp.content).message)
        try:
            data = resp.json().get("data", [])
            self.server_models = [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
        except (ValueError, AttributeError, TypeError):
            raise EngineError(f"{self.base}/v1/models did not return a model list") from None
        if not self.model and self.server_models:
            self.model = self.server_models[0]

    # --- streaming -------------------------------------------------------------------

    async def stream_batches(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[list[StreamEvent]]:
        try:
            request.validate()
        except EngineError as e:
            yield list(refused(str(e)))
            return

        async def run(emit: Emit) -> None:
            await self._run(request, emit)

        async for batch in relay_batches(self.reader, run, cancel):
            yield batch

    def url_for(self, endpoint: str) -> str:
        path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
        return self.base + path

    async def _run(self, request: GenerationRequest, emit: Emit) -> None:
        """Reader loop: send, stamp, parse, emit; always ends with Finished or Failed."""
        try:
            client = await self._client_ready()
            if self.model is None and not self.server_models:
                try:
                    await self._prepare()
                except EngineError:
                    pass  # the request itself will report what is wrong
        except EngineError as e:
            now = time.perf_counter_ns()
            emit(RequestSent(now))
            emit(Failed(now, str(e), "engine"))
            return
        body = self.build_body(request)
        context = await self.before_request()
        state = OpenAIStreamState(self.spec.endpoint)
        emit(RequestSent(time.perf_counter_ns()))
        try:
            resp = await post_json(client, self._pool, self.url_for(self.spec.endpoint), body)
        except (httpx.HTTPError, OSError, ValueError) as e:
            emit(describe_transport_error(e, self.base, self.timeouts))
            return
        try:
            if resp.status_code >= 400:
                emit(http_status_failure(resp, await error_body(resp, self.timeouts)))
                return
            emit(StampSource(time.perf_counter_ns(), stamp_source(resp)))
            ctype = resp.headers.get("content-type", "")
            if "event-stream" not in ctype:
                raw = await error_body(resp, self.timeouts)
                emit(wrong_content_failure(self.base, resp, raw, "an event stream"))
                return
            await self._read_events(resp, state, emit)
            for ev in await self.finish(state, context):
                emit(ev)
        except (StreamProtocolError, StreamServerError) as e:
            self._emit_partial(state, emit)
            kind = "protocol" if isinstance(e, StreamProtocolError) else "engine"
            emit(Failed(time.perf_counter_ns(), str(e), kind))
        except (httpx.HTTPError, OSError, Exception) as e:  # noqa: BLE001
            self._emit_partial(state, emit)
            emit(describe_transport_error(e, self.base, self.timeouts))
        finally:
            await resp.aclose()

    async def _read_events(
        self, resp: httpx.Response | Http1Response, state: OpenAIStreamState, emit: Emit
    ) -> None:
        decoder = SSEDecoder()
        first = True
        body = stamped(resp, self.timeouts)
        try:
            async for t_ns, part in body:
                if first:
                    emit(FirstByte(t_ns))
                    first = False
                for data in decoder.feed_payloads(part):
                    ev = state.on_data(data, t_ns)
                    if ev is not None:
                        emit(ev)
                    if state.done:
                        return
        finally:
            await body.aclose()  # type: ignore[attr-defined]
        now = time.perf_counter_ns()
        for sse in decoder.close():
            ev = state.on_data(sse.data, now)
            if ev is not None:
                emit(ev)

    def _emit_partial(self, state: OpenAIStreamState, emit: Emit) -> None:
        """Before a Failed: pass on the token counts the server already gave."""
        if state.usage is not None and state.usage_t_ns is not None:
            emit(usage_event(state))

    # --- hooks for server-specific engines -------------------------------------------

    def request_controls(self, request: GenerationRequest) -> dict[str, str]:
        return controls_from_body(self.build_body(request))

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body. Only standard OpenAI fields here (strict servers reject others)."""
        body: dict[str, Any] = {
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
        }
        if self.model:
            body["model"] = self.model
        if request.seed is not None:
            body["seed"] = request.seed
        if self.spec.endpoint == "chat":
            body["messages"] = request.messages
        else:
            # Raw completion: the message contents, joined; no chat template is applied.
            body["prompt"] = "\n".join(m.get("content", "") for m in request.messages)
        extra = self.spec.options.get("extra_body")
        if isinstance(extra, dict):
            body.update(extra)
        return body

    async def before_request(self) -> Any:
        """Reader loop, before RequestSent: gather what ``finish`` compares against."""
        return None

    def engine_truth(self, state: OpenAIStreamState, context: Any) -> EngineTruth | None:
        """The server's own numbers for this request, if it gives any."""
        return None

    async def finish(self, state: OpenAIStreamState, context: Any) -> list[StreamEvent]:
        """Reader loop, after the body ended: Usage, EngineReport, then Finished/Failed."""
        out: list[StreamEvent] = []
        if state.usage is not None:
            out.append(usage_event(state))
        t_end = state.last_t_ns or time.perf_counter_ns()
        if not state.done and state.finish_reason is None:
            out.append(
                Failed(
                    time.perf_counter_ns(),
                    "the stream ended before the server finished (no finish_reason, no [DONE]): "
                    "the connection was closed mid-stream",
                    "protocol",
                )
            )
            return out
        truth = await self.truth_after(state, context)
        if truth is not None:
            out.append(EngineReport(t_end, truth))
        out.append(Finished(t_end, state.finish_reason or "stop"))
        return out

    async def truth_after(self, state: OpenAIStreamState, context: Any) -> EngineTruth | None:
        return self.engine_truth(state, context)
