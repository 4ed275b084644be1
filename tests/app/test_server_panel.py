"""Server-side panel against a real llama-server (llama.cpp's own binary, test dependency),
and a server going away mid-stream."""

from __future__ import annotations

import pytest

from tests.app.app_support import SIZE, gen
from tui.app.widgets.server_panel import ServerPanel

pytestmark = pytest.mark.engine


@pytest.fixture
def llama_server(tmp_path, model_path):  # type: ignore[no-untyped-def]
    from tests.support.real_servers import start_llama_server

    server = start_llama_server(model_path, tmp_path)
    yield server
    server.stop()


async def test_llama_server_slots_shown_and_hidden_for_in_process(
    llama_server, make_config, build_app, wait_for
):
    cfg = make_config(
        'default_engine = "srv"\n'
        + gen(200)  # long enough (~2 s) for several server samples while it is busy
        + f'[engines.srv]\nkind = "llama-server"\nurl = "{llama_server.url}"\n'
        + '[engines.synth]\nkind = "synthetic"\n'
        + "[telemetry]\ninterval_s = 0.2\n"
    )
    app = build_app(cfg, telemetry=True)
    async with app.run_test(size=SIZE) as pilot:
        panel = app.chat.query_one(ServerPanel)
        await wait_for(pilot, lambda: panel.display and "slots" in panel.text, 60)
        assert "0/1 busy" in panel.text  # -np 1: one slot, idle
        seen: set[str] = set()

        def watch() -> bool:
            seen.add(panel.text)
            return not app.chat.busy

        await app.chat.submit_text("Write a long poem about the sea, with many verses.")
        await wait_for(pilot, watch, 90)
        assert any("1/1 busy" in t and "processing 1" in t for t in seen), seen
        await wait_for(pilot, lambda: "0/1 busy" in panel.text)
        await pilot.press("ctrl+n")  # the in-process synthetic engine has no server
        await wait_for(pilot, lambda: not panel.display)


async def test_server_going_away_mid_stream(llama_server, make_config, build_app, wait_for):
    cfg = make_config(
        'default_engine = "srv"\n'
        + gen(400)
        + f'[engines.srv]\nkind = "llama-server"\nurl = "{llama_server.url}"\n'
        + "[telemetry]\ninterval_s = 0.3\n"
    )
    app = build_app(cfg, telemetry=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "ready" in app.chat.query_one("EngineBar").plain(), 60)
        await app.chat.submit_text("Write a very long story about a dragon.")
        turns = lambda: app.chat.query_one("#conv-A").turns  # noqa: E731
        await wait_for(pilot, lambda: turns() and len(turns()[0].text) > 10, 60)
        llama_server.stop()
        await wait_for(pilot, lambda: not app.chat.busy, 60)
        turn = turns()[0]
        assert "ERROR" in str(turn.query_one(".summary").render())
        assert len(turn.text) > 10  # what streamed before the server went away is kept
        panel = app.chat.query_one(ServerPanel)
        await wait_for(pilot, lambda: "no metrics" in panel.text, 10)
