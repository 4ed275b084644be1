"""llama.cpp prebuilt (kind ``llamacpp-prebuilt``): PyPI's xllamacpp, in the engine worker.

xllamacpp is a wheel of llama.cpp compiled for a generic CPU (x86-64 with AVX2, or Apple
Silicon) with llama.cpp's own server inside: ``xllamacpp.Server(params)`` loads the model
and serves llama-server's HTTP API from threads of the process that made it. That
process is the engine's worker (tui/engines/inprocess/worker.py), as for the tuned
build: a crash in native code ends the worker, never infertop, and the stream in flight
ends with "engine process died: ...".

Inside the worker this engine starts the server on a free loopback port and talks to it
as infertop talks to any llama-server (tui/engines/http/llama_server.py), so both
builds report alike:

- **stamps**: each read of the stream, stamped where its bytes arrive (in the worker,
  over loopback), with the worker's usual hand-over to infertop (the first token at
  once, then frames at most every 50 ms: worker_main's frame sink); each chunk's tokens
  as the engine counts them (``predicted_n`` of the ``timings`` it carries), as the
  tuned build counts its token ids;
- **the engine's own account**: llama.cpp's ``timings`` (prompt_n, prompt_ms,
  predicted_n, predicted_ms, cache_n) as the EngineReport, as for llama-server;
- **the KV line**: ContextFill events from the ``timings`` each chunk carries
  (``timings_per_token``): tokens in the context = cache_n + prompt_n + predicted_n − 1
  (the last sampled token is not yet in the cache), every :data:`KV_FILL_EVERY` tokens
  and at the end — what the tuned build reports from ``llama_n_tokens``; the cache's
  per-token size from the GGUF's own metadata and the cache type this engine set (f16,
  llama.cpp's default), as the tuned build does;
- **controls**: ``cache_prompt`` and ``ignore_eos`` are sent in each request's body.

The CPU is checked before the library is loaded (tui/engines/files/ggml_build.py:
``prebuilt_problem``): a CPU without AVX2 gets a message, not a SIGILL.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, ClassVar

from tui.core.cancel import CancelToken
from tui.core.events import ContextFill, Failed, RequestSent, StreamEvent, TextChunk
from tui.core.kv import DEFAULT_CACHE_TYPE, UnsupportedLayout, layout_from_metadata
from tui.engines.base import (
    Engine,
    EngineError,
    EngineInfo,
    EngineSpec,
    EventSink,
    GenerationRequest,
    ThreadSink,
    controls_from_body,
)
from tui.engines.dialects.base import StreamDecoder
from tui.engines.files.default_model import DEFAULT_MODEL_NAME, resolve_model_path
from tui.engines.files.gguf import FILE_TYPES, check_gguf, read_gguf_metadata
from tui.engines.http.llama_server import LlamaServerEngine
from tui.engines.inprocess.llama_builds import PREBUILT_PIN, prebuilt_cpu_problem, prebuilt_label
from tui.engines.inprocess.llamacpp_generate import KV_FILL_EVERY
from tui.engines.inprocess.stderr_capture import captured_stderr
from tui.transport.reader_loop import Emit


class PrebuiltLlamaCppEngine(Engine):
    """See the module docstring. Options: ``quiet_stderr`` (default true: llama.cpp's
    log lines of the model load kept off the terminal)."""

    kind: ClassVar[str] = "llamacpp-prebuilt"

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        self._server: Any = None
        self._client: _ServerClient | None = None
        self._model_path: Path | None = None
        self._meta: dict[str, Any] = {}
        self._load_ms: float | None = None
        self._system_info = ""
        self._version = ""
        self._kv_layout: dict[str, Any] | None = None
        self._kv_unknown = ""

    # --- lifecycle -------------------------------------------------------------------
    async def load(self) -> float:
        """Check the CPU, start llama.cpp's server on the model, and connect to it;
        return ms until it answers (model load included)."""
        problem = prebuilt_cpu_problem()
        if problem is not None:
            raise EngineError(problem)
        path = resolve_model_path(self.spec.model)
        check_gguf(path)
        t0 = time.perf_counter_ns()
        self._server = await asyncio.to_thread(self._start_server, path)
        address = str(self._server.listening_address)
        client = _ServerClient(
            EngineSpec(
                name=self.spec.name,
                kind="llama-server",
                url=address,
                n_ctx=self.spec.n_ctx,
                read_timeout_s=self.spec.read_timeout_s,
                stall_timeout_s=self.spec.stall_timeout_s,
                options={"timings_per_token": True},
            )
        )
        self._client = client
        try:
            await client.load()
        except BaseException:
            await self.close()
            raise
        self._model_path = path
        self._load_ms = (time.perf_counter_ns() - t0) / 1e6
        self._meta = await asyncio.to_thread(_metadata, path)
        try:
            layout = layout_from_metadata(self._meta, DEFAULT_CACHE_TYPE, DEFAULT_CACHE_TYPE)
            self._kv_layout, self._kv_unknown = layout.to_dict(), ""
        except UnsupportedLayout as e:
            self._kv_layout, self._kv_unknown = None, str(e)
        return self._load_ms

    def _start_server(self, path: Path) -> Any:
        try:
            import xllamacpp
        except ImportError as e:
            raise EngineError(
                f"the prebuilt llama.cpp is not installed ({e}): pip install '{PREBUILT_PIN}'"
            ) from None
        self._system_info = str(xllamacpp.get_system_info()).strip()
        self._version = str(getattr(xllamacpp, "__version__", ""))
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.spec.n_ctx
        params.n_parallel = 1
        cores = max(1, os.cpu_count() or 1)
        params.cpuparams.n_threads = self.spec.n_threads or cores
        # the prompt on every core, as the tuned build runs it (llama-cpp-python's default
        # n_threads_batch): the two builds differ in their code, not their threads
        params.cpuparams_batch.n_threads = cores
        params.n_gpu_layers = self.spec.n_gpu_layers
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # a free port; the server says which (listening_address)
        params.endpoint_metrics = True
        with captured_stderr(bool(self.spec.options.get("quiet_stderr", True))) as log:
            try:
                return xllamacpp.Server(params)
            except (RuntimeError, ValueError, OSError) as e:
                err: Exception = e
        why = log.last_line() or str(err)
        raise EngineError(f"llama.cpp (prebuilt) could not load {path}: {why}")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
        if self._server is not None:
            held, self._server = [self._server], None
            # the last reference goes in a thread: the server's destructor stops its
            # threads and frees the model (a few ms to seconds)
            await asyncio.to_thread(held.clear)

    @property
    def loaded(self) -> bool:
        return self._client is not None

    def info(self) -> EngineInfo:
        meta = self._meta
        ftype = meta.get("general.file_type")
        quant = FILE_TYPES.get(ftype) if isinstance(ftype, int) else None
        is_default = self.spec.model in (None, "", "default")
        name = meta.get("general.name") if not is_default else DEFAULT_MODEL_NAME
        if not isinstance(name, str) or not name:
            name = self._model_path.name if self._model_path else str(self.spec.model)
        client = self._client
        props = client.props if client is not None else {}
        gen = props.get("default_generation_settings") or {}
        n_ctx = gen.get("n_ctx") if isinstance(gen, dict) else None
        path = self._model_path
        return EngineInfo(
            engine=self.spec.name,
            kind=self.kind,
            model=name,
            quantisation=quant,
            context_size=n_ctx if isinstance(n_ctx, int) else self.spec.n_ctx,
            parameters={
                "n_threads": self.spec.n_threads or os.cpu_count(),
                "n_gpu_layers": self.spec.n_gpu_layers,
                "model_path": str(path) if path else self.spec.model,
                "model_bytes": path.stat().st_size if path else None,
                "kv_layout": self._kv_layout,
                "kv_layout_unknown": self._kv_unknown,
                "system_info": self._system_info,
                "xllamacpp": self._version,
                "build_info": props.get("build_info"),
                "server": client.base if client is not None else None,
            },
            load_ms=self._load_ms,
            pid=os.getpid(),
            build=prebuilt_label(),
        )

    @classmethod
    def fixed_controls(cls, request: GenerationRequest) -> dict[str, str]:
        """As the request body this engine sends carries them (llama-server's fields)."""
        body: dict[str, Any] = {"cache_prompt": bool(request.cache_prompt)}
        if request.ignore_eos:
            body["ignore_eos"] = True
        return controls_from_body(body)

    # --- generation ------------------------------------------------------------------
    async def stream_into(
        self, request: GenerationRequest, cancel: CancelToken | None, sink: EventSink
    ) -> None:
        """Each event to ``sink`` as the client of the server reads it (in this process:
        ``isolate = false``; the worker process takes :meth:`generate_into`)."""
        client = self._client
        if client is None:
            now = time.perf_counter_ns()  # the stream contract: RequestSent, then the end
            sink(RequestSent(now))
            sink(Failed(now, "engine is not loaded", "load"))
            return
        await client.stream_into(request, cancel, sink)

    async def generate_into(
        self, request: GenerationRequest, cancel: CancelToken, out: ThreadSink
    ) -> None:
        """Every event to ``out.put`` as it is stamped, then ``out.close()`` (the worker's
        way in: its frame sink sends the first token at once, then gathers)."""
        try:
            await self.stream_into(request, cancel, out.put)
        finally:
            out.close()


class _ServerClient(LlamaServerEngine):
    """The worker's client of its own llama.cpp server: llama-server's, plus the KV fill
    from each chunk's ``timings`` (see the module docstring)."""

    async def read_body(self, resp: Any, state: StreamDecoder, emit: Emit) -> None:
        n_ctx = self.spec.n_ctx
        shown = -KV_FILL_EVERY  # the decode tokens counted at the last ContextFill
        counted = 0  # the tokens the chunks so far carried, by the server's count

        def emit_with_fill(event: StreamEvent) -> None:
            nonlocal shown, counted
            if type(event) is not TextChunk:
                emit(event)
                return
            fill = context_tokens(state.extra.get("timings"))
            if fill is not None and event.tokens is None and fill[1] >= counted:
                # the chunk's tokens as the engine counts them (predicted_n grew by that)
                event.tokens, counted = fill[1] - counted, fill[1]
            emit(event)
            if fill is not None and fill[1] - shown >= KV_FILL_EVERY:
                shown = fill[1]
                emit(ContextFill(event.t_ns, fill[0], n_ctx))

        await super().read_body(resp, state, emit_with_fill)
        fill = context_tokens(state.extra.get("timings"))
        if fill is not None:
            emit(ContextFill(time.perf_counter_ns(), fill[0], n_ctx))


def context_tokens(timings: object) -> tuple[int, int] | None:
    """(tokens in the context, tokens generated) from a chunk's ``timings``: cache_n +
    prompt_n + predicted_n − 1 (the last sampled token is not yet decoded into the
    cache); None when the chunk carries no such counts."""
    if type(timings) is not dict:
        return None
    counts = [timings.get(k) for k in ("cache_n", "prompt_n", "predicted_n")]
    if not all(type(c) is int and 0 <= c < 2**31 for c in counts):
        return None
    cache_n, prompt_n, predicted_n = counts
    assert isinstance(cache_n, int) and isinstance(prompt_n, int) and isinstance(predicted_n, int)
    return cache_n + prompt_n + max(predicted_n - 1, 0), predicted_n


def _metadata(path: Path) -> dict[str, Any]:
    try:
        return dict(read_gguf_metadata(path))
    except EngineError:
        return {}
