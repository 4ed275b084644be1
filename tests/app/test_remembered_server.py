"""The server used last time is taken again at start only when the user's own process
listens on its port. Here another user (``nobody``, run with setpriv: the test needs
root) squats the port of the remembered ``ollama:PORT``: slot A loads its usual engine,
a notification names the server and why, the prompt goes to the usual engine and the
squatter sees no request but discovery's GETs; once the user chooses it (Ctrl+N),
prompts go there. (The own-process case: test_discovery_ui.py's
test_the_server_used_last_is_taken_again_at_start.) Pilot, at 80x24."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.app_support import SYNTH, gen, submit, turns
from tests.support import port_squatter
from tui.app.state import UIState, save_state
from tui.app.widgets.engine_bar import EngineBar


@pytest.fixture
def squat() -> Iterator[port_squatter.Squat]:
    prefix = port_squatter.as_nobody()
    if prefix is None:
        pytest.skip("needs root and setpriv to run a server as another user")
    s = port_squatter.Squat(prefix)
    try:
        yield s
    finally:
        s.stop()


async def test_a_remembered_server_on_a_squatted_port_gets_no_prompt_until_chosen(  # type: ignore[no-untyped-def]
    squat, tmp_path: Path, make_config, build_app, wait_for, notes
):
    name = f"ollama:{squat.port}"
    state = tmp_path / "remembered.toml"
    save_state(state, UIState(engine=name))
    table = f"[discovery]\nports = [{squat.port}]\ntimeout_s = 1.0\n"
    cfg = 'default_engine = "synth"\n' + gen(4) + SYNTH + table
    app = build_app(make_config(cfg), discover=None, state_path=state)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.discovery_done, 15)
        assert name in app.config.engines  # found, and offered
        await wait_for(pilot, lambda: any("used last time" in n for n in notes(app)), 5)
        (note,) = [n for n in notes(app) if "used last time" in n]
        assert note.startswith(f"{name}, used last time, is running again, but owned by")
        assert "nobody" in note and "until you choose it" in note
        assert app.chat.slot_engine["A"] == "synth"
        await submit(pilot, "Which engine are you?")
        await wait_for(pilot, lambda: bool(turns(app)) and turns(app)[0].finished, 30)
        assert turns(app)[0].text.strip() and "mine" not in turns(app)[0].text
        assert squat.posts() == []  # the prompt went to synth, not to the squatter
        # the user chooses it: now it is used (and remembered, as before)
        for _ in range(len(app.config.engines)):
            if app.chat.slot_engine["A"] == name:
                break
            await pilot.press("ctrl+n")
        assert app.chat.slot_engine["A"] == name
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 30)
        await submit(pilot, "And now?")
        await wait_for(pilot, lambda: len(turns(app)) == 2 and turns(app)[1].finished, 30)
        assert turns(app)[1].text.strip() == "mine"
    assert squat.posts() == ["POST /api/generate", "POST /api/chat"]  # its preload, the prompt


async def test_a_restarted_server_whose_port_another_user_took_gets_no_prompt(  # type: ignore[no-untyped-def]
    tmp_path: Path, make_config, build_app, wait_for, notes
):
    """Issue 48: the server used last is the user's own, taken at start; it stops, and
    another user's process (``nobody``) takes its port. The next prompt is not sent (the
    port's listener is read again before each prompt), a notification says whose the
    port is now; the user chooses the server again and the prompt goes there."""
    prefix = port_squatter.as_nobody()
    if prefix is None:
        pytest.skip("needs root and setpriv to run a server as another user")
    own = port_squatter.Squat([])  # the user's own server (this test's user: root)
    other: port_squatter.Squat | None = None
    try:
        name = f"ollama:{own.port}"
        state = tmp_path / "remembered.toml"
        save_state(state, UIState(engine=name))
        table = f"[discovery]\nports = [{own.port}]\ntimeout_s = 1.0\n"
        cfg = 'default_engine = "synth"\n' + gen(4) + SYNTH + table
        app = build_app(make_config(cfg), discover=None, state_path=state)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.chat.slot_engine["A"] == name, 15)
            await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 30)
            await submit(pilot, "Which engine are you?")
            await wait_for(pilot, lambda: len(turns(app)) == 1 and turns(app)[0].finished, 30)
            assert turns(app)[0].text.strip() == "mine" and own.posts()[-1] == "POST /api/chat"
            own.stop()  # the user's server stops; another user's process takes its port
            other = port_squatter.Squat(prefix, own.port)
            assert await app.chat.submit_text("And now?") is False
            await pilot.pause(0.1)
            (note,) = [n for n in notes(app) if "was not sent" in n]
            assert note.startswith(f"{name}: the process listening on port {own.port} is not")
            assert "nobody" in note and len(turns(app)) == 1
            assert other.posts() == []  # the prompt did not reach the other user
            app.chat.use_engine("A", name)  # chosen again (what Ctrl+N and the palette do)
            assert await app.chat.submit_text("And now?")
            await wait_for(pilot, lambda: len(turns(app)) == 2 and turns(app)[1].finished, 30)
        assert other.posts() == ["POST /api/chat"]  # sent once the user chose it
    finally:
        own.stop()
        if other is not None:
            other.stop()
