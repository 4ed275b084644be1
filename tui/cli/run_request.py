"""``infertop run``'s one request: the engine loaded, the prompt streamed through the
chat core (echoed as it comes), infertop's own CPU and the hardware (``--telemetry``)
measured over it, the engine closed."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

from tui.cli.common import CLIError
from tui.cli.run_output import ReasoningEcho
from tui.config import Config
from tui.core.events import StreamEvent, TextChunk
from tui.core.outcome import Outcomes
from tui.core.timeline import RequestTimeline
from tui.core.verdict import Verdict
from tui.engines.base import EngineInfo, GenerationRequest
from tui.telemetry.own_cpu import ProcessCpu, ProcessCpuWindow

READY_WAIT_S = 15.0  # --telemetry: longest wait for a remote source's first reading


class _Hardware:
    """A source sampled in its own thread while the request runs (--telemetry)."""

    def __init__(self, source: Any, label: str, interval_s: float) -> None:
        from tui.telemetry.sampler import TelemetrySampler
        from tui.telemetry.summary import HardwareWindow

        self.label = label
        self.window = HardwareWindow()
        self.sampler = TelemetrySampler(interval_s, source=source, on_sample=self.window.add)
        self.sampler.start()  # before the engine loads: an SSH link connects meanwhile

    def begin(self) -> None:
        """The request starts: once the source has a first reading (or has failed)."""
        self.window.wait_ready(READY_WAIT_S)
        self.window.begin()

    def end(self) -> None:
        self.window.end()
        # the reading after the end covers the request's last interval
        self.window.wait_after_end(self.sampler.interval_s * 2 + 0.5)

    def stop(self) -> None:
        self.sampler.stop()

    def summary(self) -> Any:
        from tui.telemetry.summary import summarize

        return summarize(self.label, list(self.window.samples), self.window.last)


def open_hardware(text: str | None, cfg: Any) -> _Hardware | None:
    if not text:
        return None
    from tui.telemetry.sources import SourceError, open_source, parse_source

    try:
        source_spec = parse_source(text)
    except SourceError as e:
        raise CLIError(f"--telemetry: {e}") from None
    t = cfg.telemetry
    source = open_source(source_spec, t.interval_s, t.gpu)
    return _Hardware(source, source_spec.label, t.interval_s)


async def run_request(
    cfg: Config,
    spec: Any,
    request: GenerationRequest,
    echo: bool,
    hardware: _Hardware | None = None,
    raw: bool = False,
    outcomes: Outcomes | None = None,
    content_tap: Any = None,
) -> tuple[EngineInfo, float, RequestTimeline, ProcessCpu, Verdict | None, str | None]:
    """Load, stream (echoing the text: raw when ``raw``, else terminal-safe), close;
    infertop's own CPU is measured over the request. The turn runs through the chat core,
    as the TUI's do (tui/chat/core.py); the last two items are the answer's verdict and
    what disturbed it (a build compiling beside it: tui/engines/files/build_state.py),
    or None."""
    from tui.chat.core import ChatCore
    from tui.engines.files.build_state import BuildWatch

    echoed = ReasoningEcho(raw)

    def tap(slot: str, event: StreamEvent) -> None:  # the engine's thread, in order
        if echo and isinstance(event, TextChunk) and event.text:
            echoed.write(event)

    config = dataclasses.replace(cfg, engines={spec.name: spec}, default_engine=spec.name)
    core = ChatCore(
        config,
        lambda event: None,
        initial=spec.name,
        tap=tap,
        outcomes=outcomes,
        source="run",
        disturbance=BuildWatch().disturbance,
    )
    core.content_tap = content_tap
    host = core.host(spec.name)
    try:
        load_ms = await host.load()
        if hardware is not None:
            await asyncio.to_thread(hardware.begin)
        window = ProcessCpuWindow()
        prompt = request.messages[-1].get("content", "")
        await core.run_turn(core.start_turn(prompt, {"A": request}))
        echoed.end()
        info = host.info()
        assert info is not None and core.live["A"] is not None
        own = window.end(engine_inside=info.pid == os.getpid())
        if hardware is not None:
            await asyncio.to_thread(hardware.end)
        live = core.live["A"]
        return info, load_ms, live.timeline, own, core.last_verdict["A"], live.disturbed
    finally:
        await core.close()


def content_tap(exporter: Any) -> Any:
    """The chat core's content tap when the exporter captures content (--capture-content):
    the prompt and the answer to the request's span, as the conventions' message JSON."""
    if exporter is None or not exporter.capture_content:
        return None
    from tui.otel.spans import answer_json, messages_json

    def tap(rid: str, messages: list[dict[str, str]], text: str, finish: str | None) -> None:
        exporter.attach_content(rid, messages_json(messages), answer_json(text, finish))

    return tap
