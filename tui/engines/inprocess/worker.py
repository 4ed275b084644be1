"""In-process engines, run in a worker process that infertop owns.

llama.cpp (and vLLM's in-process mode) run native code in the process that loads them. A
SIGILL, SIGSEGV or abort in that code kills the process — so it must not be infertop's.
:class:`WorkerEngine` starts ``python -m tui.engines.inprocess.worker_main`` and drives the real
engine there over a socketpair (:mod:`tui.engines.inprocess.worker_wire`). When the worker dies, the
stream in flight ends with a Failed event ("engine process died: SIGSEGV
(Segmentation fault)") after everything it streamed; infertop stays up, and ``load()``
starts a fresh worker.

Timing: tokens are stamped in the worker, where they are produced, with
``time.perf_counter_ns`` — CLOCK_MONOTONIC on Linux, mach_absolute_time on macOS,
QueryPerformanceCounter on Windows: one clock for every process on the machine, so the
worker's stamps and this process's stamps are on the same time line
(tests/engines/test_worker.py proves it). RequestSent is stamped here, when the request
is written to the worker, so the hand-over counts inside TTFT as a server's queue would.

The event loop that drives the engine (the chat core's engine-host thread, the bench's
own loop) reads the worker's socket itself (``add_reader``) and hands each batch of
events to the stream's consumer loop (:class:`~tui.transport.handoff.Handoff`): one
wake-up per batch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from typing import Any, ClassVar

from tui.core.cancel import CancelToken
from tui.core.child_python import absolute_if_path
from tui.core.events import Failed, RequestSent
from tui.engines.base import (
    Engine,
    EngineError,
    EngineInfo,
    EngineSpec,
    EventSink,
    GenerationRequest,
)
from tui.engines.inprocess.worker_process import WorkerProcess


class WorkerEngine(Engine):
    """An in-process engine (``target``, "module:Class") hosted in a worker process."""

    kind: ClassVar[str] = "worker"
    target: ClassVar[str] = ""

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        self._worker: WorkerProcess | None = None
        self._info: EngineInfo | None = None
        self._ready = False  # an engine is loaded in the running worker

    # -- lifecycle ------------------------------------------------------------------
    async def load(self) -> float:
        """Start a worker (if none runs) and load the engine there; return ms until ready
        (process start, imports and model load: what a user waits for)."""
        t0 = time.perf_counter_ns()
        worker = self._worker
        if worker is not None and not worker.running:  # it died: its successor starts below
            worker.release()
            worker = self._worker = None
        if worker is None:
            worker = self._worker = await asyncio.to_thread(WorkerProcess, self.spec.name)
        self._ready = False
        # the worker runs in a neutral folder: a relative model path is made absolute here
        inner = dataclasses.replace(
            self.spec,
            model=absolute_if_path(self.spec.model),
            options=_inner_options(self.spec.options),
        )
        ok, payload = await worker.call("load", self.target, inner)
        if not ok:
            await self.close()
            raise EngineError(str(payload))
        model_ms, info = payload
        load_ms = (time.perf_counter_ns() - t0) / 1e6
        info.load_ms = load_ms
        info.parameters = {**info.parameters, "model_load_ms": model_ms, "worker": "process"}
        self._info = info
        self._ready = True
        return load_ms

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        self._ready = False
        if worker is not None:
            await worker.close()

    def request_controls(self, request: GenerationRequest) -> dict[str, str]:
        """The hosted engine's own (its class says; nothing needs the worker)."""
        from tui.engines.kinds import engine_class

        fixed = engine_class(self.kind).fixed_controls(request)
        return fixed if fixed is not None else super().request_controls(request)

    def info(self) -> EngineInfo:
        if self._info is not None:
            info = dataclasses.replace(self._info)
            info.pid = self.pid
            return info
        return EngineInfo(engine=self.spec.name, kind=self.kind, model=str(self.spec.model))

    @property
    def pid(self) -> int | None:
        """The worker's process id (its RSS is the engine's), None when none runs."""
        worker = self._worker
        return worker.pid if worker is not None and worker.running else None

    @property
    def died(self) -> str | None:
        """Why the worker process ended on its own (None while it runs or was closed)."""
        worker = self._worker
        return None if worker is None else worker.died

    @property
    def loaded(self) -> bool:
        worker = self._worker
        return self._ready and worker is not None and worker.running

    # -- streams --------------------------------------------------------------------

    async def stream_into(
        self, request: GenerationRequest, cancel: CancelToken | None, sink: EventSink
    ) -> None:
        """The worker's frames for this stream, each event to ``sink`` on the caller's
        loop, in the order the worker sent them."""
        worker = self._worker
        opened = worker.open_route(asyncio.get_running_loop()) if worker and self._ready else None
        t_sent = time.perf_counter_ns()
        if worker is None or opened is None:
            sink(RequestSent(t_sent))
            sink(Failed(t_sent, self._not_ready(), "load"))
            return
        rid, route = opened
        worker.send_quietly(("stream", rid, request))  # if it is gone, the reader says why
        sink(RequestSent(t_sent))
        token = cancel or CancelToken()
        forget = token.on_cancel(lambda: worker.send_quietly(("cancel", rid)))
        ended = False
        try:
            async for batch in route.handoff.batches_until_close():
                for event in batch:
                    sink(event)
            ended = True
        finally:
            forget()
            if not ended:  # the consumer left early: stop the generation in the worker
                worker.send_quietly(("cancel", rid))
            worker.close_route(rid)

    def _not_ready(self) -> str:
        died = self.died
        if died is not None:
            return f"{died}; reload the engine to start a new one"
        return "engine is not loaded"


def _inner_options(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k != "isolate"}


@functools.cache
def worker_class(kind: str, target: str) -> type[WorkerEngine]:
    """The WorkerEngine class that hosts engine kind ``kind`` (``target`` = module:Class)."""
    name = "".join(part.capitalize() for part in kind.replace("-", "_").split("_")) + "Worker"
    cls = type(name, (WorkerEngine,), {"kind": kind, "target": target, "__module__": __name__})
    return cls
