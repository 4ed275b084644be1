"""Ollama on its native API: /api/chat NDJSON streaming, durations as engine truth.

Each streamed line is a JSON object; ``message.content`` carries text; the last line has
``done: true`` and Ollama's own account in nanoseconds: total_duration, load_duration
(model load: the cold start), prompt_eval_count / prompt_eval_duration (prefill),
eval_count / eval_duration (decode). Ollama omits fields that are zero, so a prompt
served from its cache has no prompt_eval_count: that becomes "not reported" (None),
never a guessed number. ``keep_alive: 0`` (:meth:`OllamaEngine.unload`) frees the model
so the next request starts cold. Ollama's counts are tokens it *evaluated*: it does not
report the prompt's full length.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from tui.core.events import (
    EngineReport,
    EngineTruth,
    Failed,
    Finished,
    FirstByte,
    StreamEvent,
    TextChunk,
    Usage,
)
from tui.engines.base import (
    EngineError,
    EngineInfo,
    EngineSpec,
    GenerationRequest,
)
from tui.engines.http_engine import HttpStreamEngine, Response
from tui.engines.stream_errors import StreamProtocolError, StreamServerError
from tui.transport.http_calls import read_stamped
from tui.transport.http_io import EventDeadline
from tui.transport.reader_loop import Emit
from tui.transport.sse import NDJSONDecoder

NS_PER_MS = 1_000_000
MAX_COUNT = 2**63  # a token count at or past this is not a count


def truth_from_final(final: dict[str, Any]) -> EngineTruth:
    """EngineTruth from the ``done: true`` line (missing fields stay None)."""

    def ns_ms(key: str) -> float | None:
        v = final.get(key)
        if not isinstance(v, int | float) or isinstance(v, bool):
            return None
        try:
            ms = v / NS_PER_MS  # an int too large for a float raises OverflowError
        except OverflowError:
            return None
        return ms if 0 <= ms < math.inf else None  # NaN, Infinity, < 0: not a duration

    def count(key: str) -> int | None:
        v = final.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < MAX_COUNT:
            return None  # a count no float can hold would break every rate
        return int(v)

    raw = {k: v for k, v in final.items() if k not in ("message", "model", "created_at")}
    if "prompt_eval_count" not in final:
        raw["note"] = "prompt_eval_count omitted (Ollama omits zero: a prompt-cache hit)"
    eval_count = count("eval_count")
    return EngineTruth(
        prompt_tokens=None,
        prompt_eval_tokens=count("prompt_eval_count"),
        prompt_ms=ns_ms("prompt_eval_duration"),
        output_tokens=eval_count,
        decode_tokens=eval_count,
        decode_ms=ns_ms("eval_duration"),
        load_ms=ns_ms("load_duration"),
        source="ollama durations",
        raw=raw,
    )


@dataclass
class StreamState:
    """What the lines of one stream have said so far (see :func:`read_line`)."""

    final: dict[str, Any] | None = None
    final_t_ns: int | None = None
    last_t_ns: int | None = None


def read_line(line: str, t_ns: int, state: StreamState, emit: Emit) -> None:
    """One NDJSON line of /api/chat (or /api/generate): its text as a TextChunk, and for
    the ``done: true`` line Usage and the EngineReport (``state.final`` set).

    Raises only StreamProtocolError (not a JSON object) or StreamServerError.
    """
    state.last_t_ns = t_ns
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
        raise StreamProtocolError(f"malformed NDJSON line: {line[:120]!r}") from None
    if not isinstance(obj, dict):
        raise StreamProtocolError(f"NDJSON line is not an object: {line[:120]!r}")
    if obj.get("error"):
        raise StreamServerError(f"server error: {str(obj['error'])[:300]}")
    msg = obj.get("message")
    text = msg.get("content") if isinstance(msg, dict) else obj.get("response")
    parts = [text] if isinstance(text, str) else []
    if isinstance(msg, dict) and isinstance(msg.get("thinking"), str):
        parts.insert(0, msg["thinking"])
    text = "".join(parts)
    if text:
        emit(TextChunk(t_ns, text, None))
    if obj.get("done") is True:
        state.final = obj
        state.final_t_ns = t_ns
        truth = truth_from_final(obj)
        emit(Usage(t_ns, truth.prompt_eval_tokens, truth.output_tokens))
        emit(EngineReport(t_ns, truth))


class OllamaEngine(HttpStreamEngine):
    kind: ClassVar[str] = "ollama"
    content_type: ClassVar[str] = "json"
    content_name: ClassVar[str] = "NDJSON"

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

    def new_state(self) -> StreamState:
        return StreamState()

    async def read_body(self, resp: Response, state: StreamState, emit: Emit) -> None:
        decoder = NDJSONDecoder()
        deadline = EventDeadline(self.timeouts.stall)
        first = True

        def on_part(t_ns: int, part: bytes) -> bool:
            nonlocal first
            if first:
                emit(FirstByte(t_ns))
                first = False
            lines = decoder.feed(part)  # EventTooLarge: an endless line
            for line in lines:
                read_line(line, t_ns, state, emit)
                if state.final is not None:
                    return True
            deadline.check(t_ns, decoder.pending, bool(lines))  # EventStalled: a drip
            return False

        await read_stamped(resp, self.timeouts, on_part)
        if state.final is not None:
            return
        rest = decoder.close()
        if rest:
            read_line(rest, time.perf_counter_ns(), state, emit)

    async def finish(self, state: StreamState, context: Any) -> list[StreamEvent]:
        if state.final is None:
            return [
                Failed(
                    time.perf_counter_ns(),
                    "the stream ended before the server finished (no done: true line): "
                    "the connection was closed mid-stream",
                    "protocol",
                )
            ]
        reason = str(state.final.get("done_reason") or "stop")
        return [Finished(state.final_t_ns or time.perf_counter_ns(), reason)]
