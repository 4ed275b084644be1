"""When a turn's engine work starts: after the new turn is painted when the engine shares
the UI's few cores (the layout and first paint of a new turn, the UI's costliest moment
of an answer, then take no core from the engine), at once otherwise.

"At once" is read where the app decides it: the turn's worker is started inside the
submit, not after a refresh. Whether the new turn has been laid out by then is Textual's
and asyncio's scheduling, not the app's: the submit awaits the turn's mount, during which
a loaded 2-core CI runner has laid it out (area 1620, twice), so that is not asserted.
"""

from __future__ import annotations

import pytest

import tui.app.screens.chat as chat_screen
from tests.app.app_support import SIZE, SYNTH, gen
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.prompt import PromptInput


async def _when_the_turn_starts(app, pilot, wait_for) -> list[tuple[bool, int]]:  # type: ignore[no-untyped-def]
    """Submit one prompt; for each start of its engine work, whether the submit had
    returned by then and the new turn's on-screen area (0: mounted, not laid out)."""
    chat = app.chat
    conv = chat.query_one("#conv-A", Conversation)
    submitted = False
    seen: list[tuple[bool, int]] = []
    submit_text, start = chat.submit_text, chat._start

    async def watched_submit(text):  # type: ignore[no-untyped-def]
        nonlocal submitted
        try:
            return await submit_text(text)
        finally:
            submitted = True

    def watched_start(requests):  # type: ignore[no-untyped-def]
        seen.append((submitted, conv.turns[-1].region.area))
        start(requests)

    chat.submit_text, chat._start = watched_submit, watched_start
    prompt = chat.query_one(PromptInput)
    prompt.load_text("Name a colour.")
    prompt.focus()
    await pilot.press("enter")
    await wait_for(pilot, lambda: bool(conv.turns) and conv.turns[-1].finished)
    assert conv.turns[-1].text.strip()  # the engine was asked, and the answer came whole
    return seen


@pytest.mark.parametrize("shares", [True, False])
async def test_the_engine_starts_after_the_new_turn_is_painted_when_it_shares_the_cores(
    make_config, build_app, wait_for, monkeypatch, shares
):
    monkeypatch.setattr(chat_screen, "shares_cores_with_ui", lambda spec: shares)
    app = build_app(make_config('default_engine = "synth"\n' + gen(8) + SYNTH))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain())
        seen = await _when_the_turn_starts(app, pilot, wait_for)
    assert len(seen) == 1
    after_submit, area = seen[0]
    if shares:
        assert after_submit and area > 0  # laid out and painted before the engine was asked
    else:
        assert not after_submit  # started inside the submit, no refresh waited for
