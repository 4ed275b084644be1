"""Run one engine stream and collect what came out (events, timeline, metrics)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tui.core.cancel import CancelToken
from tui.core.events import Failed, Finished, RequestSent, StreamEvent
from tui.core.metrics import RequestMetrics, compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.base import Engine, GenerationRequest


@dataclass
class StreamResult:
    events: list[StreamEvent]
    timeline: RequestTimeline
    metrics: RequestMetrics

    @property
    def failed(self) -> Failed | None:
        last = self.events[-1]
        return last if isinstance(last, Failed) else None

    @property
    def text(self) -> str:
        return self.timeline.text


async def collect(
    engine: Engine,
    request: GenerationRequest,
    cancel: CancelToken | None = None,
    block_consumer_s: float = 0.0,
) -> StreamResult:
    """Drain ``engine.stream``; checks the event contract on the way.

    ``block_consumer_s``: after each event, block this thread that long (a slow consumer).
    """
    events: list[StreamEvent] = []
    tl = RequestTimeline()
    async for ev in engine.stream(request, cancel):
        events.append(ev)
        tl.add(ev)
        if block_consumer_s:
            time.sleep(block_consumer_s)
    assert events and isinstance(events[0], RequestSent), events[:1]
    ends = [e for e in events if isinstance(e, Finished | Failed)]
    assert len(ends) == 1 and ends[0] is events[-1], events[-3:]
    return StreamResult(events, tl, compute_metrics(tl))
