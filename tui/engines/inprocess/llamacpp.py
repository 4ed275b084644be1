"""llama.cpp in-process (llama-cpp-python): generation in a thread, tokens stamped there.

This module loads the model (the build's safe defaults, the KV cache's types and layout)
and runs each request in the generation thread (:mod:`tui.engines.inprocess.llamacpp_generate`,
the loop itself). The generation thread samples one token at a time with
``Llama.generate`` and stamps it with ``perf_counter_ns`` the moment the token id is
returned, before any hand-off to asyncio. Token counts are the number of token ids
generated (end-of-generation excluded). Engine truth comes from llama.cpp's perf context
(``llama_perf_context``): prefill (t_p_eval_ms, n_p_eval) and decode (t_eval_ms, n_eval)
as llama.cpp itself timed them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from pathlib import Path
from typing import Any

from tui.core.cancel import CancelToken
from tui.core.events import (
    Failed,
    RequestSent,
)
from tui.core.kv import (
    CACHE_TYPE_BYTES,
    DEFAULT_CACHE_TYPE,
    UnsupportedLayout,
    layout_from_metadata,
)
from tui.engines.base import (
    Engine,
    EngineError,
    EngineInfo,
    EventSink,
    GenerationRequest,
    ThreadSink,
)
from tui.engines.files.default_model import DEFAULT_MODEL_NAME, resolve_model_path
from tui.engines.files.ggml_build import cpu_flags, cpu_has_amx
from tui.engines.files.gguf import FILE_TYPES, check_gguf
from tui.engines.inprocess.llamacpp_generate import generate
from tui.engines.inprocess.stderr_capture import captured_stderr
from tui.transport.handoff import Handoff

UNQUANTISED = frozenset({"f32", "f16", "bf16"})

# llama.cpp's general.file_type enum -> name (the common ones)


class LlamaCppEngine(Engine):
    """llama.cpp in this process. Options (``[engines.X.options]``): ``quiet_stderr``
    (default true: keep llama.cpp's log lines off the terminal), ``seed``,
    ``use_extra_bufts`` (true / false / "auto", the default: llama.cpp's extra buffer
    types — weight repacking and the AMX matmul path — are turned off when the installed
    build has AMX code and the CPU has AMX, the combination that dies with SIGILL; see
    tui/engines/files/ggml_build.py)."""

    kind = "llamacpp"

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        self._llm: Any = None
        self._model_path: Path | None = None
        self._load_ms: float | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._quiet = bool(spec.options.get("quiet_stderr", True))
        self._extra_bufts: bool | None = None  # as loaded
        self._extra_bufts_why = ""
        self._kv_layout: dict[str, Any] | None = None
        self._kv_unknown = ""

    # --- lifecycle -------------------------------------------------------------------
    async def load(self) -> float:
        """Load the GGUF in a thread (the event loop stays free); return load ms."""
        path = resolve_model_path(self.spec.model)
        check_gguf(path)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llamacpp")
        loop = asyncio.get_running_loop()
        self._llm, load_ms = await loop.run_in_executor(self._executor, self._load, path)
        self._model_path, self._load_ms = path, load_ms
        return load_ms

    def _load(self, path: Path) -> tuple[Any, float]:
        try:
            import llama_cpp
        except ImportError as e:  # pragma: no cover - depends on the install
            raise EngineError(f"llama-cpp-python is not installed ({e})") from None
        n_threads = self.spec.n_threads or max(1, os.cpu_count() or 1)
        extra, self._extra_bufts_why = extra_bufts_choice(
            self.spec.options.get("use_extra_bufts", "auto"),
            llama_cpp.llama_print_system_info().decode(errors="replace"),
            cpu_flags(),
        )
        self._extra_bufts = extra
        type_k, type_v = (
            cache_type_option(self.spec.options, key, llama_cpp) for key in ("type_k", "type_v")
        )
        t0 = time.perf_counter_ns()
        with captured_stderr(self._quiet) as log, model_defaults(llama_cpp, extra):
            try:
                llm = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=self.spec.n_ctx,
                    n_threads=n_threads,
                    n_gpu_layers=self.spec.n_gpu_layers,
                    seed=int(self.spec.options.get("seed", llama_cpp.LLAMA_DEFAULT_SEED)),
                    type_k=type_k[1],
                    type_v=type_v[1],
                    # llama.cpp keeps a quantised V cache only with flash attention
                    flash_attn=type_v[0] not in UNQUANTISED,
                    verbose=False,
                )
            except (ValueError, RuntimeError, OSError) as e:
                err: Exception | None = e
            else:
                err = None
        if err is not None:
            why = log.last_line() or str(err)
            raise EngineError(f"llama.cpp could not load {path}: {why}")
        load_ms = (time.perf_counter_ns() - t0) / 1e6
        try:
            layout = layout_from_metadata(dict(llm.metadata or {}), type_k[0], type_v[0])
            self._kv_layout, self._kv_unknown = layout.to_dict(), ""
        except UnsupportedLayout as e:
            self._kv_layout, self._kv_unknown = None, str(e)
        return llm, load_ms

    async def close(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            executor = self._executor
            if executor is not None:
                await asyncio.get_running_loop().run_in_executor(executor, llm.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    def info(self) -> EngineInfo:
        llm = self._llm
        meta: dict[str, str] = dict(getattr(llm, "metadata", {}) or {}) if llm else {}
        ftype = meta.get("general.file_type")
        quant = (
            FILE_TYPES.get(int(ftype)) if ftype and ftype.isascii() and ftype.isdigit() else None
        )
        is_default = self.spec.model in (None, "", "default")
        name = (
            DEFAULT_MODEL_NAME
            if is_default
            else meta.get("general.name")
            or (self._model_path.name if self._model_path else str(self.spec.model))
        )
        return EngineInfo(
            engine=self.spec.name,
            kind=self.kind,
            model=name,
            quantisation=quant,
            context_size=llm.n_ctx() if llm else self.spec.n_ctx,
            parameters={
                "n_threads": self.spec.n_threads or os.cpu_count(),
                "n_gpu_layers": self.spec.n_gpu_layers,
                "model_path": str(self._model_path) if self._model_path else self.spec.model,
                "model_bytes": self._model_path.stat().st_size if self._model_path else None,
                "use_extra_bufts": self._extra_bufts,
                "use_extra_bufts_why": self._extra_bufts_why,
                "kv_layout": self._kv_layout,
                "kv_layout_unknown": self._kv_unknown,
            },
            load_ms=self._load_ms,
            pid=os.getpid(),
        )

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    @classmethod
    def fixed_controls(cls, request: GenerationRequest) -> dict[str, str]:
        return {
            "cache_prompt": "enforced: the context is reset before the request (no prefix reuse)"
            if not request.cache_prompt
            else "off: the context's matching prefix is reused",
            "ignore_eos": "enforced: end-of-generation tokens are skipped"
            if request.ignore_eos
            else "off: generation stops at end-of-generation",
        }

    # --- generation -----------------------------------------------------------------

    async def stream_into(
        self, request: GenerationRequest, cancel: CancelToken | None, sink: EventSink
    ) -> None:
        """The generation thread's events, handed over to the caller's loop in the
        batches they came in, each to ``sink`` there (in this process: ``isolate =
        false``; a worker process sends from the thread itself: :meth:`generate_into`)."""
        if self._llm is None or self._executor is None:
            now = time.perf_counter_ns()  # the stream contract: RequestSent, then the end
            sink(RequestSent(now))
            sink(Failed(now, "engine is not loaded", "load"))
            return
        loop = asyncio.get_running_loop()
        handoff = Handoff(loop)
        stop = threading.Event()
        token = cancel or CancelToken()

        # Sent = submitted: time queued behind another request (one model, one thread)
        # belongs inside TTFT, as it does for a server's queue.
        t_sent = time.perf_counter_ns()
        future = loop.run_in_executor(
            self._executor, generate, self._llm, request, handoff, stop, token, t_sent
        )
        try:
            async with aclosing(handoff.batches_until_close()) as batches:
                async for batch in batches:
                    for event in batch:
                        sink(event)
        finally:
            stop.set()
            await asyncio.shield(future)

    async def generate_into(
        self, request: GenerationRequest, cancel: CancelToken, out: ThreadSink
    ) -> None:
        """Answer ``request`` with every event handed to ``out.put`` *in the generation
        thread*, then ``out.close()``. The worker process uses this to send events from the
        generation thread, with no event-loop hop in between: the first token the moment it
        is stamped, then gathered into frames (see worker_main's frame sink)."""
        if self._llm is None or self._executor is None:
            now = time.perf_counter_ns()
            out.put(RequestSent(now))
            out.put(Failed(now, "engine is not loaded", "load"))
            out.close()
            return
        stop = threading.Event()
        t_sent = time.perf_counter_ns()
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, generate, self._llm, request, out, stop, cancel, t_sent
        )
        try:
            await asyncio.shield(future)
        finally:
            stop.set()


def cache_type_option(options: dict[str, Any], key: str, llama_cpp: Any) -> tuple[str, int | None]:
    """(name, ggml type id) of the KV cache type option ``key`` (``type_k``/``type_v``);
    (f16, None) when unset: llama.cpp's default. EngineError naming the option otherwise."""
    name = options.get(key)
    if name is None:
        return DEFAULT_CACHE_TYPE, None
    ggml_id = getattr(llama_cpp, f"GGML_TYPE_{str(name).upper()}", None)
    if str(name).lower() not in CACHE_TYPE_BYTES or not isinstance(ggml_id, int):
        known = ", ".join(CACHE_TYPE_BYTES)
        raise EngineError(f"options.{key} must be a KV cache type ({known}); got {name!r}")
    return str(name).lower(), ggml_id


def extra_bufts_choice(option: object, system_info: str, flags: frozenset[str]) -> tuple[bool, str]:
    """Whether to load with llama.cpp's extra buffer types, and why (for info/doctor)."""
    if isinstance(option, bool):
        return option, "set in config"
    if option not in (None, "auto"):
        raise EngineError(f'use_extra_bufts must be true, false or "auto" (got {option!r})')
    build_amx = "AMX_INT8 = 1" in system_info
    if build_amx and cpu_has_amx(flags):
        return False, "off: this llama.cpp build has AMX code and the CPU has AMX (SIGILL risk)"
    return True, "on (llama.cpp's default)"


_defaults_lock = threading.Lock()


@contextlib.contextmanager
def model_defaults(llama_cpp: Any, use_extra_bufts: bool) -> Iterator[None]:
    """Load with ``use_extra_bufts`` set: llama-cpp-python's ``Llama`` takes no such
    argument, so its default model parameters are patched for the duration of the load."""
    if use_extra_bufts:
        yield
        return
    module = llama_cpp.llama_cpp
    original = module.llama_model_default_params

    def defaults() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    with _defaults_lock:
        module.llama_model_default_params = defaults
        try:
            yield
        finally:
            module.llama_model_default_params = original
