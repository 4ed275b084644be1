"""The replay engine: plays a recorded session back at its recorded pace.

Each ``stream()`` call plays the next record of the session file (options: ``file``,
``speed`` = playback speed factor, default 1.0). Chunk i is emitted at
t_start + t_i / speed, where t_i is its recorded offset from the request being sent;
events are stamped when they are emitted (so the metrics shown are those of the
playback, which match the recording within scheduling jitter). Token counts, engine
truth, finish reason and errors are the recorded ones.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from tui.core.cancel import CancelToken
from tui.core.events import (
    TRUTH_NUMBERS,
    EngineReport,
    EngineTruth,
    Failed,
    Finished,
    RequestSent,
    StampSource,
    StreamEvent,
    TextChunk,
    Usage,
    engine_word,
    failure_kind_of,
)
from tui.core.session import read_session
from tui.engines.base import EngineError, EngineInfo, GenerationRequest, GeneratorEngine


class ReplayEngine(GeneratorEngine):
    kind = "replay"

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        opts = dict(spec.options)
        self.file = opts.pop("file", None) or spec.model
        try:
            self.speed = float(opts.pop("speed", 1.0))
        except (TypeError, ValueError):
            raise EngineError("replay: speed must be a number") from None
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise EngineError("replay: speed must be a finite number > 0")
        self.records: list[dict[str, Any]] = []
        self.bad_lines: list[int] = []
        self.position = 0

    async def load(self) -> float:
        t0 = time.perf_counter()
        if not self.file:
            raise EngineError("replay: no session file given")
        try:
            got = await asyncio.to_thread(read_session, self.file)
        except OSError as e:
            raise EngineError(f"cannot read session file {self.file}: {e.strerror}") from None
        if not got.records:
            raise EngineError(f"no requests recorded in {self.file}")
        self.records, self.bad_lines = got.records, got.bad_lines
        return (time.perf_counter() - t0) * 1000.0

    def info(self) -> EngineInfo:
        first = self.records[0] if self.records else {}
        label = f"replay of {os.path.basename(str(self.file))}"
        if first:
            label += f" ({first.get('engine', '?')}: {first.get('model', '?')})"
        return EngineInfo(
            engine=self.spec.name,
            kind=self.kind,
            model=label,
            parameters={"speed": self.speed, "records": len(self.records)},
            pid=os.getpid(),
        )

    async def events(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        cancel = cancel or CancelToken()
        t0 = time.perf_counter_ns()
        yield RequestSent(t0)
        if self.position >= len(self.records):
            yield Failed(time.perf_counter_ns(), "the recorded session has no more requests")
            return
        rec = self.records[self.position]
        self.position += 1
        tl = rec["timeline"]
        recorded = tl.get("stamp_source") or "not recorded"
        yield StampSource(t0, f"replayed at its recorded pace (recorded: {recorded})")
        for t_rel, text, tokens in tl.get("chunks", []):
            if await _sleep_until(t0 + int(t_rel / self.speed), cancel):
                yield Finished(time.perf_counter_ns(), "cancelled")
                return
            yield TextChunk(time.perf_counter_ns(), str(text), tokens)
        end_rel = tl.get("t_end_ns")
        if end_rel is not None:
            await _sleep_until(t0 + int(end_rel / self.speed), cancel)
        now = time.perf_counter_ns()
        if tl.get("prompt_tokens") is not None or tl.get("usage_output_tokens") is not None:
            yield Usage(now, tl.get("prompt_tokens"), tl.get("usage_output_tokens"))
        truth = rec.get("engine_truth")
        if isinstance(truth, dict):
            fields: dict[str, Any] = {k: truth.get(k) for k in TRUTH_NUMBERS}
            yield EngineReport(
                now, EngineTruth(**fields, source=f"recorded: {truth.get('source')}")
            )
        if tl.get("error"):
            kind = failure_kind_of(tl.get("error_kind")) or "engine"
            yield Failed(time.perf_counter_ns(), str(tl["error"]), kind)
        else:
            yield Finished(time.perf_counter_ns(), engine_word(tl.get("finish_reason")) or "stop")


async def _sleep_until(due_ns: int, cancel: CancelToken) -> bool:
    while True:
        if cancel.cancelled:
            return True
        left = due_ns - time.perf_counter_ns()
        if left <= 0:
            return False
        await asyncio.sleep(min(left, 50_000_000) / 1e9)
