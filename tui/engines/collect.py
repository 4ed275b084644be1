"""Drive one request through an engine and collect its timeline (no UI involved)."""

from __future__ import annotations

from collections.abc import Callable

from tui.core.cancel import CancelToken
from tui.core.events import StreamEvent
from tui.core.timeline import RequestTimeline
from tui.engines.base import Engine, GenerationRequest


async def run_request(
    engine: Engine,
    request: GenerationRequest,
    on_event: Callable[[StreamEvent], None] | None = None,
    cancel: CancelToken | None = None,
) -> RequestTimeline:
    """Stream ``request`` through ``engine``; every event goes into the timeline (and to
    ``on_event``, e.g. to print text). The timestamps are the engine's, not ours."""
    timeline = RequestTimeline()

    def add(event: StreamEvent) -> None:
        timeline.add(event)
        if on_event is not None:
            on_event(event)

    await engine.stream_into(request, cancel, add)
    return timeline
