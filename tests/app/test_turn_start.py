"""When a turn's engine work starts: after the new turn is painted when the engine shares
the UI's few cores (the layout and first paint of a new turn, the UI's costliest moment
of an answer, then take no core from the engine), at once otherwise."""

from __future__ import annotations

import pytest
from app_support import SIZE, SYNTH, gen

import tui.app.screens.chat as chat_screen
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.prompt import PromptInput


async def _turn_on_screen_when_the_engine_is_asked(app, pilot, wait_for) -> list[int]:  # type: ignore[no-untyped-def]
    """Submit one prompt; the new turn's on-screen area when the core is asked to run it."""
    conv = app.chat.query_one("#conv-A", Conversation)
    seen: list[int] = []
    run_turn = app.chat.core.run_turn

    async def watched(requests):  # type: ignore[no-untyped-def]
        seen.append(conv.turns[-1].region.area)  # 0: mounted, not laid out nor painted
        return await run_turn(requests)

    app.chat.core.run_turn = watched
    prompt = app.chat.query_one(PromptInput)
    prompt.load_text("Name a colour.")
    prompt.focus()
    await pilot.press("enter")
    await wait_for(pilot, lambda: bool(conv.turns) and conv.turns[-1].finished)
    assert conv.turns[-1].text.strip()  # the answer came whole either way
    return seen


@pytest.mark.parametrize("shares", [True, False])
async def test_the_engine_starts_after_the_new_turn_is_painted_when_it_shares_the_cores(
    make_config, build_app, wait_for, monkeypatch, shares
):
    monkeypatch.setattr(chat_screen, "shares_cores_with_ui", lambda spec: shares)
    app = build_app(make_config('default_engine = "synth"\n' + gen(8) + SYNTH))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain())
        seen = await _turn_on_screen_when_the_engine_is_asked(app, pilot, wait_for)
    assert len(seen) == 1
    if shares:
        assert seen[0] > 0  # laid out and painted before the engine was asked
    else:
        assert seen[0] == 0  # asked at once, before the screen's next refresh
