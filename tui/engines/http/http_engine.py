"""HttpStreamEngine: what every HTTP-streaming engine shares, written once.

The client (infertop's lean HTTP/1.1 client with kernel receive stamps for plain http://,
httpx for the rest), readiness calls, the relay from the reader loop to the caller, and one
way to turn each fault into a Failed event — so the OpenAI-compatible engines (and their
llama-server and vLLM subclasses) and Ollama cannot disagree about what a fault is:

- the engine cannot be made ready (no API key, a readiness call fails): ``connect``;
- the server answers with an HTTP error: ``http`` (with the server's own message);
- the bytes are not the protocol (malformed SSE/NDJSON, a stream that stops early):
  ``protocol``; the server reports an error inside the stream: ``engine``;
- the transport fails (refused, reset, timeout, a stall): as
  :func:`~tui.engines.http.http_common.describe_transport_error` classifies it.

Anything else is a bug in infertop, not a transport fault: it is not caught here, and the
relay ends the stream with ``Failed(kind="internal")`` naming it.

A subclass says what to send (:meth:`build_body`, :meth:`stream_url`), in which dialect
the answer comes (:meth:`dialect`: tui/engines/dialects/kinds.py's descriptor, which
gives the decoder that reads it, the proxy's too, and the Content-Type it must have) and
how it ends (:meth:`finish`). Reading is the
same for all: each read stamped where it arrived, fed to the decoder, the stall deadline
checked per event (:meth:`read_body`).
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import time
from collections import Counter
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx

from tui.core.cancel import CancelToken
from tui.core.events import Failed, Finished, FirstByte, RequestSent, StampSource, StreamEvent
from tui.core.outcome import Where
from tui.engines.base import (
    Engine,
    EngineError,
    EngineSpec,
    EventSink,
    GenerationRequest,
    controls_from_body,
    refused,
)
from tui.engines.dialects import Dialect, route_dialect
from tui.engines.dialects.base import StreamDecoder
from tui.engines.dialects.errors import StreamProtocolError, StreamServerError
from tui.engines.http.http_common import (
    access_for,
    base_url,
    describe_transport_error,
    http_status_failure,
    make_client,
    wrong_content_failure,
)
from tui.transport.access import HttpAccess
from tui.transport.http1 import Http1Pool, Http1Response, fast_path_ok
from tui.transport.http_calls import (
    error_body,
    fetch_whole,
    post_json,
    read_stamped,
    stamp_source,
)
from tui.transport.http_io import TRANSPORT_ERRORS, EventDeadline, HttpTimeouts, WholeResponse
from tui.transport.prometheus import Scrape, ScrapeError, parse
from tui.transport.reader_loop import Emit, HttpReader, relay_into
from tui.transport.sse import EventTooLarge
from tui.transport.whole import json_body

Response = httpx.Response | Http1Response
# sending: the transport, or a ValueError for a body JSON cannot hold (NaN)
SEND_ERRORS: tuple[type[BaseException], ...] = (*TRANSPORT_ERRORS, ValueError)


def trace_header(request: GenerationRequest) -> dict[str, str] | None:
    """The ``traceparent`` field of a request that sends one (trace propagation)."""
    if request.trace is None or not request.send_traceparent:
        return None
    return {"traceparent": request.trace.traceparent()}


class HttpStreamEngine(Engine):
    """An engine that streams its answers over HTTP from a server at ``spec.url``."""

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        self.base = base_url(spec)
        self.calls: Counter[str] = Counter()  # small calls made ("GET /metrics": n)
        self.timeouts = HttpTimeouts.from_spec(spec)
        self.reader = HttpReader.shared()
        self.model: str | None = spec.model
        self.server_models: list[str] = []
        self.load_ms: float | None = None
        self._access_made: HttpAccess | None = None
        self._client: httpx.AsyncClient | None = None
        self._pool: Http1Pool | None = None  # plain http://: the lean client
        self._plain: bool | None = None  # whether the lean client serves (None: not asked)

    # --- the clients (reader loop only) ----------------------------------------------
    def _access(self) -> HttpAccess:
        """Headers and TLS for every request (EngineError: an unset API key variable)."""
        if self._access_made is None:
            self._access_made = access_for(self.spec)
        return self._access_made

    def _pool_ready(self) -> Http1Pool | None:
        """The lean client for plain http:// (None: https, a proxy, credentials in the
        URL; then httpx). Made on first use."""
        if self._pool is None and self._plain is not False:
            self._plain = fast_path_ok(self.base)
            if self._plain:
                self._pool = Http1Pool(self._access().headers, self.timeouts)
        return self._pool

    async def _client_ready(self) -> httpx.AsyncClient:
        """The httpx client: for what the lean client does not do. Made on first use (a
        bench against a plain http:// server never makes one, nor imports anyio)."""
        if self._client is None:
            self._client = make_client(self.spec, self._access())
        return self._client

    async def _clients(self) -> tuple[httpx.AsyncClient | None, Http1Pool | None]:
        """(httpx client, lean pool): the pool where it serves, else the client (the other
        None). EngineError when the engine's access cannot be set up."""
        pool = self._pool_ready()
        return (None if pool is not None else await self._client_ready()), pool

    async def request_raw(self, method: str, path: str, body: Any = None) -> WholeResponse:
        """Reader loop: one small call (``body``: JSON or None), read to its end, through the
        lean client where it serves. Raises TRANSPORT_ERRORS, or EngineError. Counted in
        :attr:`calls` (the bench lists the requests it made that were not measured)."""
        self.calls[f"{method} {path}"] += 1
        client, pool = await self._clients()
        return await fetch_whole(client, pool, method, self.base + path, body, self.timeouts)

    async def request_metrics(self) -> Scrape | None:
        """Reader loop: the server's Prometheus /metrics now, parsed; None when it cannot
        be read (not served, not 200, a transport error, or not the exposition format)."""
        try:
            r = await self.request_raw("GET", "/metrics")
            return parse(r.content.decode("utf-8", "replace")) if r.status_code == 200 else None
        except TRANSPORT_ERRORS + (ScrapeError,):
            return None

    async def request_json(self, method: str, path: str, body: Any = None) -> Any:
        """Reader loop: one small JSON call; EngineError with a one-line reason."""
        try:
            r = await self.request_raw(method, path, body)
        except TRANSPORT_ERRORS as e:
            raise EngineError(
                describe_transport_error(e, self.base, self.timeouts).message
            ) from None
        if r.status_code >= 400:
            raise EngineError(http_status_failure(r, r.content).message)
        try:
            return json_body(r.content)
        except ValueError:  # not JSON, nested too deep, a number too long
            raise EngineError(f"{self.base}{path} did not return JSON") from None

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await self.reader.call(client.aclose())
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await self.reader.call(pool.aclose())  # its sockets are closed on return

    def request_controls(self, request: GenerationRequest) -> dict[str, str]:
        return controls_from_body(self.build_body(request))

    # --- a stream --------------------------------------------------------------------
    async def stream_into(
        self, request: GenerationRequest, cancel: CancelToken | None, sink: EventSink
    ) -> None:
        """Each event to ``sink``: straight from the reading task when the caller runs on
        the reader's loop (the bench, the chat's engine host), else in the batches of a
        reader-loop turn, on the caller's loop (tui/transport/reader_loop.py:
        :func:`relay_into`)."""
        try:
            request.validate()
        except EngineError as e:
            for ev in refused(str(e)):
                sink(ev)
            return
        await relay_into(self.reader, partial(self._run, request, cancel), cancel, sink)

    async def _run(
        self, request: GenerationRequest, cancel: CancelToken | None, emit: Emit
    ) -> None:
        """Reader loop: send, stamp, parse, emit; always ends with Finished or Failed."""
        try:
            client, pool = await self._clients()
            await self.before_stream()
        except EngineError as e:
            now = time.perf_counter_ns()
            emit(RequestSent(now))
            emit(Failed(now, str(e), "connect"))
            return
        body = self.build_body(request)
        context = await self.before_request()
        dialect = self.dialect()
        state = dialect.new_decoder()
        emit(RequestSent(time.perf_counter_ns()))
        try:
            resp = await post_json(client, pool, self.stream_url(), body, trace_header(request))
        except SEND_ERRORS as e:
            emit(describe_transport_error(e, self.base, self.timeouts))
            return
        try:
            if resp.status_code >= 400:
                emit(http_status_failure(resp, await error_body(resp, self.timeouts)))
                return
            emit(StampSource(time.perf_counter_ns(), stamp_source(resp)))
            if dialect.content_type not in resp.headers.get("content-type", ""):
                raw = await error_body(resp, self.timeouts)
                emit(wrong_content_failure(self.base, resp, raw, dialect.content_name))
                return
            await self.read_body(resp, state, emit)
            for ev in await self.finish(state, context):
                emit(ev)
        except asyncio.CancelledError:
            if cancel is not None and cancel.cancelled:  # the token stopped it mid-answer
                emit(Finished(time.perf_counter_ns(), "cancelled", state.response_model))
            raise  # (the relay keeps the first ending: its own Finished "cancelled" is dropped)
        except StreamProtocolError as e:
            self.fail_partial(state, emit, Failed(time.perf_counter_ns(), str(e), "protocol"))
        except EventTooLarge as e:
            sent = f"{self.base} sent {e}"
            self.fail_partial(state, emit, Failed(time.perf_counter_ns(), sent, "protocol"))
        except StreamServerError as e:
            self.fail_partial(state, emit, Failed(time.perf_counter_ns(), str(e), "engine"))
        except TRANSPORT_ERRORS as e:
            self.fail_partial(state, emit, describe_transport_error(e, self.base, self.timeouts))
        finally:
            await resp.aclose()

    # --- what a subclass says ---------------------------------------------------------
    async def before_stream(self) -> None:
        """Reader loop, before a stream: get ready if not yet (EngineError: cannot)."""

    async def before_request(self) -> Any:
        """Reader loop, before RequestSent: gather what :meth:`finish` compares against."""
        return None

    @abc.abstractmethod
    def stream_url(self) -> str:
        """Where a streamed request is POSTed."""

    def where(self, model: str | None = None) -> Where:
        """The stream URL's path, its wire dialect, the server's URL."""
        route = urlsplit(self.stream_url()).path
        return Where(
            route, route_dialect(route) or self.kind, self.base, model or self.spec.model, self.kind
        )

    @abc.abstractmethod
    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body of a streamed request."""

    @abc.abstractmethod
    def dialect(self) -> Dialect:
        """The dialect its answers come in (tui/engines/dialects/kinds.py)."""

    async def read_body(self, resp: Response, state: StreamDecoder, emit: Emit) -> None:
        """Read the streamed body, each read stamped where it arrived and fed to the
        decoder; the stall deadline holds per event (a drip fails with EventStalled).
        The decoder's own faults (StreamProtocolError, StreamServerError, EventTooLarge)
        pass up. Ends with the decoder closed: its held text and the server's counts."""
        deadline = EventDeadline(self.timeouts.stall)
        feed = state.feed
        first = True

        def on_part(t_ns: int, part: bytes) -> bool:
            nonlocal first
            if first:
                emit(FirstByte(t_ns))
                first = False
            completed = feed(part, t_ns, emit)  # EventTooLarge: an endless event
            if state.complete:
                return True
            deadline.check(t_ns, state.pending, completed)  # EventStalled: a drip
            return False

        await read_stamped(resp, self.timeouts, on_part)
        state.close(time.perf_counter_ns(), emit)

    @abc.abstractmethod
    async def finish(self, state: Any, context: Any) -> list[StreamEvent]:
        """After the body: the last events, ending with exactly one Finished or Failed."""

    def fail_partial(self, state: StreamDecoder, emit: Emit, failed: Failed) -> None:
        """A stream that failed after its body began: the token counts the server already
        gave (unless the decoder's close already did), then ``failed``, naming the model
        the answer named before it failed."""
        usage = None if state.closed else state.usage_event()
        if usage is not None:
            emit(usage)
        if state.response_model is not None and failed.model is None:
            failed = dataclasses.replace(failed, model=state.response_model)
        emit(failed)
