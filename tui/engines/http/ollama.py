"""Ollama on its native API: /api/chat NDJSON streaming, durations as engine truth.

Each streamed line is a JSON object; ``message.content`` carries text,
``message.thinking`` reasoning; the last line has ``done: true`` and Ollama's own account
in nanoseconds: total_duration, load_duration (model load: the cold start),
prompt_eval_count / prompt_eval_duration (prefill), eval_count / eval_duration (decode).
The lines are read by tui/engines/dialects/ollama.py (the proxy's reader too), which says
what each field means. ``keep_alive: 0`` (:meth:`OllamaEngine.unload`) frees the model
so the next request starts cold.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from tui.core.events import Failed, StreamEvent
from tui.engines.base import (
    EngineError,
    EngineInfo,
    EngineSpec,
    GenerationRequest,
)
from tui.engines.dialects import Dialect, dialect_named
from tui.engines.dialects.base import StreamDecoder
from tui.engines.http.http_engine import HttpStreamEngine

NS_PER_MS = 1_000_000


class OllamaEngine(HttpStreamEngine):
    kind: ClassVar[str] = "ollama"

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        self.version: str | None = None

    async def _prepare(self) -> float:
        tags = await self.request_json("GET", "/api/tags")
        models = tags.get("models") if isinstance(tags, dict) else None
        if not isinstance(models, list):
            raise EngineError(f"{self.base}/api/tags did not list models: is this Ollama?")
        self.server_models = [
            str(m.get("name") or m.get("model")) for m in models if isinstance(m, dict)
        ]
        if not self.model:
            if not self.server_models:
                raise EngineError(f"Ollama at {self.base} has no models (ollama pull MODEL)")
            self.model = self.server_models[0]
        try:
            v = await self.request_json("GET", "/api/version")
            self.version = str(v.get("version")) if isinstance(v, dict) else None
        except EngineError:
            self.version = None
        t0 = time.perf_counter_ns()
        # An /api/generate call with no prompt loads the model (Ollama's documented preload).
        await self.request_json(
            "POST", "/api/generate", self._with_keep_alive({"model": self.model, "stream": False})
        )
        return (time.perf_counter_ns() - t0) / NS_PER_MS

    def _with_keep_alive(self, body: dict[str, Any]) -> dict[str, Any]:
        if "keep_alive" in self.spec.options:
            body["keep_alive"] = self.spec.options["keep_alive"]
        return body

    async def load(self) -> float:
        """Load the model on the server (preload request); returns that wall time in ms."""
        self.load_ms = await self.reader.call(self._prepare())
        return self.load_ms

    async def unload(self) -> None:
        """``keep_alive: 0``: the server frees the model; the next request starts cold."""
        if not self.model:
            raise EngineError("no model to unload")
        await self.reader.call(
            self.request_json(
                "POST", "/api/generate", {"model": self.model, "keep_alive": 0, "stream": False}
            )
        )

    def info(self) -> EngineInfo:
        return EngineInfo(
            engine=self.spec.name,
            kind=self.kind,
            model=self.model or "(unknown)",
            parameters={"version": self.version},
            load_ms=self.load_ms,
            url=self.base,
            pid=self.spec.options.get("pid"),
        )

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        options: dict[str, Any] = {
            "num_predict": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
        }
        if request.seed is not None:
            options["seed"] = request.seed
        extra = self.spec.options.get("options")
        if isinstance(extra, dict):
            options.update(extra)
        body = {
            "model": self.model,
            "messages": request.messages,
            "stream": True,
            "options": options,
        }
        return self._with_keep_alive(body)

    # --- streaming -------------------------------------------------------------------

    async def before_stream(self) -> None:
        if not self.model:
            await self._prepare()

    def stream_url(self) -> str:
        return self.base + "/api/chat"

    def dialect(self) -> Dialect:
        return dialect_named("ollama")

    async def finish(self, state: StreamDecoder, context: Any) -> list[StreamEvent]:
        """The last event: Finished at the done line, or Failed when it never came."""
        end = state.end(time.perf_counter_ns())
        if isinstance(end, Failed):
            end = Failed(
                end.t_ns,
                "the stream ended before the server finished (no done: true line): "
                "the connection was closed mid-stream",
                "protocol",
                end.model,
            )
        return [end]
