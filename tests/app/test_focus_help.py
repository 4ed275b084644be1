"""Keys reach the prompt whenever the chat comes back (F2 round trips, the palette, the
help screen, engine switches), and F1 lists the app's own keys first, as remapped."""

from __future__ import annotations

import pytest

from tests.app.app_support import SYNTH, gen
from tui.app.screens.help import HelpScreen
from tui.app.widgets.prompt import PromptInput

TWO = SYNTH + '[engines.other]\nkind = "synthetic"\n'


async def _typed(pilot, app, text: str) -> None:  # type: ignore[no-untyped-def]
    prompt = app.chat.query_one(PromptInput)
    prompt.clear()
    await pilot.press(*text)
    await pilot.pause()
    assert prompt.text == text, f"typing went elsewhere (focus: {app.focused!r})"


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_typing_reaches_the_prompt_after_each_way_back(
    make_config, build_app, wait_for, size
) -> None:
    app = build_app(make_config('default_engine = "synth"\n' + gen() + TWO))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.chat.query_one(PromptInput).has_focus, 10)
        await _typed(pilot, app, "one")
        if size == (80, 24):
            await pilot.press("f2")  # the panels instead of the chat
            await pilot.pause()
            assert app.chat.has_class("-show-panels")
            await pilot.press("f2")
            await pilot.pause()
            await _typed(pilot, app, "two")
        await pilot.press("ctrl+p")  # the command palette, closed again
        await wait_for(pilot, lambda: app.screen is not app.chat, 5)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.chat, 5)
        await _typed(pilot, app, "three")
        await pilot.press("f1")  # help, closed again
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), 5)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.chat, 5)
        await _typed(pilot, app, "four")
        app.chat.query_one("#conv-A").focus()  # focus elsewhere, then switch engine
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: app.chat.slot_engine["A"] == "other", 5)
        await _typed(pilot, app, "five")
        app.chat.query_one("#conv-A").focus()
        await pilot.press("ctrl+o")  # A/B on
        await wait_for(pilot, lambda: app.chat.ab, 5)
        await _typed(pilot, app, "six")


async def test_f1_lists_the_app_keys_grouped_and_remapped(make_config, build_app, wait_for):
    cfg = 'default_engine = "synth"\n[ui.keys]\nnext_engine = "ctrl+e"\n' + gen() + TWO
    app = build_app(make_config(cfg))
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), 5)
        text = app.screen.text  # type: ignore[attr-defined]
        lines = text.splitlines()
        first = next(i for i, ln in enumerate(lines) if ln.strip())
        assert lines[first].split()[0] == "chat", lines[first]  # app keys first, grouped
        for group in ("chat", "engines", "A/B", "panels", "bench", "themes", "app"):
            assert any(ln.startswith(group) for ln in lines), group
        engine_line = next(ln for ln in lines if "next engine in slot A" in ln)
        assert "Ctrl+E" in engine_line and "Ctrl+N" not in engine_line  # as remapped
        assert "Ctrl+O" in next(ln for ln in lines if "A/B mode: one prompt" in ln)
        # the prompt's editing keys come after the app's
        app_end = max(i for i, ln in enumerate(lines) if "quit" in ln)
        assert any("cursor" in ln.lower() for ln in lines[app_end:])
        assert not any("cursor" in ln.lower() for ln in lines[:app_end])
        await pilot.press("f1")
        await wait_for(pilot, lambda: app.screen is app.chat, 5)
