"""Where the engine's inside and the verdicts show in the UI: the narrow strip's engine
part, an answer's "why:", and the requests view's engine line (e: all of it), agent
sessions (a) and the highlighted request's verdict — all terminal-safe."""

from __future__ import annotations

from typing import Any

from tests.app.screen_text import screen_text
from tests.app.test_requests_screen import ROWS, FixedFeed, _app, _shown
from tui.app.format import why_text
from tui.app.widgets.strip import strip_text
from tui.core.events import EngineTruth
from tui.core.inside import EngineInside, SlotState
from tui.core.metrics import RequestMetrics
from tui.core.verdict import Seen, judge
from tui.proxy.watch import WatchSnapshot

QUEUED = judge(
    RequestMetrics(ttft_ms=2000.0, ttfr_ms=5.0, e2e_ms=3000.0, output_tokens=20, decode_ms=1000.0),
    EngineTruth(prompt_tokens=40, prompt_eval_tokens=40, prompt_ms=200.0, decode_ms=990.0),
    Seen(others_at_send=1, slots_total=1),
)


def test_the_strip_gives_the_engine_room_before_the_hardware() -> None:
    engine = "slots 1/1 · deferred 1"
    assert strip_text("", "KV 22/2,048 tok", None, 200, engine) == (
        "KV 22/2,048 tok │ slots 1/1 · deferred 1 │ F2 panels"
    )
    assert strip_text("", "KV 22/2,048 tok", None, 30, engine) == engine
    assert why_text(QUEUED) == " · why: queued 1.8 s behind 1 busy slot (-np 1)"
    assert why_text(None) == ""


class InsideFeed(FixedFeed):
    def snapshot(self) -> WatchSnapshot:
        snap = super().snapshot()
        snap.inside = EngineInside(
            kind="llama-server",
            t=1.0,
            running=1,
            waiting=1,
            slots_total=1,
            slots_busy=1,
            slots=(SlotState(0, 4096, True, 812, 700, 40),),
            ctx_high_water=2048,
        )
        snap.verdicts = {ROWS[0].id: QUEUED}
        evil: dict[str, Any] = {
            "id": "msg-1",
            "client": "10.0.0.9\x1b]0;pwned\x07",
            "turns": 6.0,
            "context_tokens": 2340.0,
            "cached_tokens": 1900.0,
            "computed_tokens": 440.0,
            "prefill_ms": 1200.0,
            "decode_ms": 3400.0,
            "queue_ms": 0.0,
            "client_ms": 12100.0,
        }
        snap.sessions = [evil]
        return snap


async def test_requests_view_engine_sessions_and_verdict(make_config, build_app, wait_for):
    app = _app(make_config, build_app, InsideFeed())
    async with app.run_test(size=(120, 40)) as pilot:
        await _shown(pilot, wait_for)
        text = screen_text(app)
        assert "engine: slots 1/1 · deferred 1 · ctx max 2,048 (e: all, a: sessions)" in text
        assert "why: queued 1.8 s behind 1 busy slot (-np 1)" in text  # the top row's
        await pilot.press("e")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "slot 0  ctx 812/4,096 (20%) · decoded 40 · 700 from cache" in text
        await pilot.press("a")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "msg-1 10.0.0.9␛]0;pwned␇ · 6 turns · ctx 2,340 · cached/computed 1,900/440" in text
        assert "client 12.1 s" in text and "\x1b" not in text
