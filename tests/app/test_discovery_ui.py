"""Discovery in the TUI, against real servers on free ports named in ``[discovery]
ports`` (the same table a user sets): a llama-server and the Ollama emulator (three
tags of the real SmolLM2) are listed soon after start and join Ctrl+N and the palette;
a model picked in the palette is the one the next request names; Ctrl+O, Enter sets up
an A/B with the same model on another engine; a GGUF from a scanned folder opens
in-process. Pilot tests, at 80x24 where the screen is read."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.command import CommandPalette

from tests.app.app_support import LOCAL, SIZE, SYNTH, gen
from tests.app.screen_text import screen_text
from tests.support import ollama_emulator
from tests.support import real_servers as servers
from tui.app.screens.ab_picker import ABPicker
from tui.app.widgets.engine_bar import EngineBar

pytestmark = pytest.mark.engine

TAGS = ("smollm2:135m-instruct-q4_1", "tinychat:latest")


@pytest.fixture(scope="module")
def found(model_path: Path, tmp_path_factory) -> Iterator[dict[str, object]]:  # type: ignore[no-untyped-def]
    """A llama-server on SmolLM2 and the Ollama emulator with three tags, on free ports;
    and a closed port (the table's third entry)."""
    logs = tmp_path_factory.mktemp("server-logs")
    try:
        ls = servers.start_llama_server(model_path, logs)
    except servers.ServerStartError as e:
        servers.unavailable("llama-server", str(e))
    emu = ollama_emulator.OllamaEmulator(model_path, n_threads=1, more_names=TAGS)
    port, stop = ollama_emulator.start_in_thread(emu)
    try:
        yield {
            "llama": int(ls.url.rsplit(":", 1)[1]),
            "ollama": port,
            "closed": servers.free_port(),
            "emu": emu,
        }
    finally:
        stop()
        ls.stop()


def _table(found: dict[str, object]) -> str:
    ports = ", ".join(str(found[k]) for k in ("ollama", "llama", "closed"))
    return f"[discovery]\nports = [{ports}]\ntimeout_s = 1.0\n"


async def _palette(pilot, query: str, want: str, wait_for) -> None:  # type: ignore[no-untyped-def]
    """Open the palette, type ``query``, wait for a hit containing ``want``, run it."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), 10)
    await pilot.press(*query)

    def shown() -> bool:
        return want in screen_text(app)

    try:
        await wait_for(pilot, shown, 15)
    except AssertionError:
        scan = getattr(app, "gguf_scan", None)
        notes = scan.notes if scan is not None else "no scan"
        raise AssertionError(f"{want!r} not shown; scan: {notes}\n{screen_text(app)}") from None
    await pilot.pause(0.3)  # the last search's hits are in
    await pilot.press("enter")


async def test_found_servers_join_the_engines(found, make_config, build_app, wait_for, notes):  # type: ignore[no-untyped-def]
    ollama, llama = f"ollama:{found['ollama']}", f"llama-server:{found['llama']}"
    app = build_app(
        make_config('default_engine = "synth"\n' + gen(8) + SYNTH + _table(found)),
        discover=None,  # as config says
    )
    async with app.run_test(size=(80, 24)) as pilot:
        t0 = time.monotonic()
        await wait_for(pilot, lambda: app.discovery_done, 10)
        took = time.monotonic() - t0
        sys.stderr.write(f"\n[discovery listed the servers {took:.2f} s after start]\n")
        assert took < 2.0, f"servers listed {took:.2f} s after start (goal: within 2 s)"
        assert list(app.config.engines) == ["synth", ollama, llama]
        assert any(ollama in n and llama in n for n in notes(app))
        await wait_for(pilot, lambda: ollama in app.catalog.models, 10)
        # Ctrl+N: the next engine is the first server found
        await pilot.press("ctrl+n")
        assert app.chat.slot_engine["A"] == ollama
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 60)
        assert ollama in screen_text(app)
        # the palette lists the found engines for either slot
        await _palette(pilot, "engine b: llama-server", f"Engine B: {llama}", wait_for)
        assert app.chat.slot_engine["B"] == llama


async def test_palette_model_is_the_one_the_next_request_names(  # type: ignore[no-untyped-def]
    found, make_config, build_app, wait_for
):
    emu = found["emu"]
    ollama = f"ollama:{found['ollama']}"
    app = build_app(
        make_config('default_engine = "synth"\n' + gen(6) + SYNTH + _table(found)), discover=None
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: ollama in app.catalog.models, 10)
        await _palette(pilot, "tinychat", f"Model A: {ollama} › tinychat:latest", wait_for)
        assert app.chat.slot_engine["A"] == ollama
        assert app.config.engines[ollama].model == "tinychat:latest"
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 60)
        before = len(emu.requested)  # type: ignore[attr-defined]
        assert await app.chat.submit_text("Say hi")
        await wait_for(pilot, lambda: not app.chat.busy, 90)
        chats = [m for p, m in emu.requested[before:] if p == "/api/chat"]  # type: ignore[attr-defined]
        assert chats == ["tinychat:latest"]
        # and the palette's line said what the server says of it
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), 10)
        await pilot.press(*"smollm2:135m-instr")
        await wait_for(pilot, lambda: "135M · Q4_1 · 98 MB" in screen_text(app), 15)


async def test_ctrl_o_enter_compares_the_same_model_on_another_engine(  # type: ignore[no-untyped-def]
    found, make_config, build_app, wait_for
):
    ollama = f"ollama:{found['ollama']}"
    app = build_app(make_config(gen(6) + LOCAL + _table(found)), discover=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: len(app.catalog.models) == 2, 15)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, ABPicker), 10)
        picker = app.screen
        assert isinstance(picker, ABPicker)
        first = picker.choices[0]
        assert first.same_model
        # the emulator's three tags of this GGUF, and llama-server on this very file
        assert [(c.engine.split(":")[0], c.same_model) for c in picker.choices] == [
            ("ollama", True),
            ("ollama", True),
            ("ollama", True),
            ("llama-server", True),
        ]
        text = screen_text(app)
        assert "A/B: compare slot A with" in text and f"= {ollama} › smollm2:135m" in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.chat.ab, 10)
        assert app.chat.slot_engine["B"] == ollama
        assert app.config.engines[ollama].model == first.model
        bar = app.chat.query_one(EngineBar)
        await wait_for(pilot, lambda: bar.plain().count("ready") == 2, 90)
        assert await app.chat.submit_text("Hi")
        await wait_for(pilot, lambda: not app.chat.busy, 120)
        # Ctrl+O again turns A/B off, and on again without asking (B is chosen now)
        await pilot.press("ctrl+o")
        assert not app.chat.ab
        await pilot.press("ctrl+o")
        assert app.chat.ab and not isinstance(app.screen, ABPicker)


async def test_open_a_gguf_from_a_scanned_folder(  # type: ignore[no-untyped-def]
    model_path: Path, tmp_path: Path, make_config, build_app, wait_for, notes
):
    folder = tmp_path / "lmstudio" / "models" / "HuggingFaceTB"
    folder.mkdir(parents=True)
    copy = folder / "SmolLM2-135M-Instruct-Q4_1.gguf"
    try:
        os.link(model_path, copy)
    except OSError:
        copy.write_bytes(model_path.read_bytes())
    table = f'[discovery]\nenabled = false\ngguf_dirs = ["{tmp_path / "lmstudio"}"]\n'
    app = build_app(make_config('default_engine = "synth"\n' + gen(6) + SYNTH + table))
    async with app.run_test(size=SIZE) as pilot:
        await _palette(pilot, "open gguf", "SmolLM2-135M-Instruct-Q4_1.gguf — llama", wait_for)
        name = "gguf:SmolLM2-135M-Instruct-Q4_1"
        assert app.chat.slot_engine["A"] == name
        assert app.config.engines[name].model == str(copy)
        assert any("loading SmolLM2-135M-Instruct-Q4_1.gguf" in n for n in notes(app))
        bar = app.chat.query_one(EngineBar)
        # the progress line while the worker loads it (the worker's start takes seconds)
        await wait_for(pilot, lambda: "s · reading 98 MB GGUF)" in bar.plain(), 30)
        await wait_for(pilot, lambda: "ready" in bar.plain(), 90)
        assert await app.chat.submit_text("Hi")
        await wait_for(pilot, lambda: not app.chat.busy, 90)
        metrics = app.chat.core.last_metrics["A"]
        assert metrics is not None and (metrics.output_tokens or 0) > 0


async def test_discovery_never_delays_the_first_frame(make_config, build_app, wait_for):  # type: ignore[no-untyped-def]
    """A port that accepts and never answers, with a long timeout: the chat is drawn and
    takes input while the probe waits."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    port = s.getsockname()[1]
    try:
        table = f"[discovery]\nports = [{port}]\ntimeout_s = 30\n"
        app = build_app(
            make_config('default_engine = "synth"\n' + gen(4) + SYNTH + table), discover=None
        )
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 30)
            assert await app.chat.submit_text("Hi")
            await wait_for(pilot, lambda: not app.chat.busy, 30)
            assert not app.discovery_done  # still waiting on the silent port
            s.close()  # its queued connection is reset: the probe ends now
            await wait_for(pilot, lambda: app.discovery_done, 10)
            assert app.catalog.discovered == []
    finally:
        s.close()


async def test_loading_says_for_how_long(make_config, build_app, wait_for):  # type: ignore[no-untyped-def]
    slow = '[engines.slow]\nkind = "synthetic"\noptions = { load_ms = 2500 }\n'
    app = build_app(make_config('default_engine = "slow"\n' + gen(4) + slow))
    async with app.run_test(size=(80, 24)) as pilot:
        bar = app.chat.query_one(EngineBar)
        await wait_for(pilot, lambda: "loading (1 s)" in bar.plain(), 10)
        await wait_for(pilot, lambda: "ready" in bar.plain(), 10)


def test_model_option_opens_a_gguf_in_a_real_terminal(model_path: Path, tmp_path: Path) -> None:
    """``infertop --model PATH`` in tmux at 80x24: slot A is ``gguf:NAME`` and its model
    loads in-process; a path that is no GGUF is one line and exit 1."""
    import shlex
    import subprocess

    from tests.support.tmux_pane import Tmux

    root = Path(__file__).resolve().parents[2]
    cfg = tmp_path / "c.toml"
    cfg.write_text("[discovery]\nenabled = false\n")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "TERM": "xterm-256color",
        "PYTHONPATH": str(root),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    bad = subprocess.run(
        [sys.executable, "-m", "tui", "--config", str(cfg), "--model", str(cfg)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        f"infertop: error: --model: not a GGUF model (bad magic b'[dis'): {cfg}"
    ]
    argv = [sys.executable, "-m", "tui", "--config", str(cfg), "--model", str(model_path)]
    command = "env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command += " " + shlex.join(argv) + "; sleep 30"
    tmux = Tmux(f"infertop-model-{os.getpid()}")
    tmux("new-session", "-d", "-s", "e2e", "-x", "80", "-y", "24", command)
    try:
        screen = tmux.wait(
            lambda s: "gguf:SmolLM2" in s and ("ready" in s or "error" in s), 120, "the model"
        )
        tmux("send-keys", "-t", "e2e", "C-q")
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
    assert "A ● gguf:SmolLM2-135M-Instruct.Q4_1" in screen and "ready" in screen, screen


async def test_a_configured_server_lists_its_models_once_ready(  # type: ignore[no-untyped-def]
    found, make_config, build_app, wait_for
):
    """Discovery off: an Ollama engine from config lists its models when it is ready,
    and the palette switches it to another of them."""
    emu = found["emu"]
    engine = (
        f'[engines.emu]\nkind = "ollama"\nurl = "http://127.0.0.1:{found["ollama"]}"\n'
        'model = "smollm2:135m"\n[discovery]\nenabled = false\n'
    )
    app = build_app(make_config('default_engine = "emu"\n' + gen(4) + engine))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: len(app.catalog.models.get("emu", [])) == 3, 60)
        await _palette(pilot, "model a: tinychat", "Model A: emu › tinychat:latest", wait_for)
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 60)
        before = len(emu.requested)  # type: ignore[attr-defined]
        assert await app.chat.submit_text("Hi")
        await wait_for(pilot, lambda: not app.chat.busy, 90)
        chats = [m for p, m in emu.requested[before:] if p == "/api/chat"]  # type: ignore[attr-defined]
        assert chats == ["tinychat:latest"]


async def test_a_server_started_later_is_found_from_the_palette(  # type: ignore[no-untyped-def]
    model_path: Path, make_config, build_app, wait_for, notes
):
    port = servers.free_port()
    table = f"[discovery]\nports = [{port}]\ntimeout_s = 1.0\n"
    app = build_app(
        make_config('default_engine = "synth"\n' + gen(4) + SYNTH + table), discover=None
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.discovery_done, 10)
        assert app.catalog.discovered == []
        emu = ollama_emulator.OllamaEmulator(model_path, n_threads=1)
        _, stop = ollama_emulator.start_in_thread(emu, port=port)
        try:
            await _palette(pilot, "discover local", "Discover local servers again", wait_for)
            await wait_for(pilot, lambda: f"ollama:{port}" in app.config.engines, 10)
            assert any(f"found ollama:{port}" in n for n in notes(app))
            await wait_for(pilot, lambda: f"ollama:{port}" in app.catalog.models, 10)
            await _palette(pilot, "discover local", "Discover local servers again", wait_for)
            await wait_for(pilot, lambda: "no new local server found" in notes(app), 10)
        finally:
            stop()


async def test_the_server_used_last_is_taken_again_at_start(  # type: ignore[no-untyped-def]
    found, tmp_path: Path, make_config, build_app, wait_for
):
    """The state file says slot A was on a server discovery found: the next start waits
    for discovery and slot A is that server again, the default engine never loaded; a
    server gone since: the default engine loads once discovery has looked."""
    from tui.app.state import UIState, save_state

    ollama = f"ollama:{found['ollama']}"
    state = tmp_path / "remembered.toml"
    save_state(state, UIState(engine=ollama))
    cfg = 'default_engine = "synth"\n' + gen(4) + SYNTH + _table(found)
    app = build_app(make_config(cfg), discover=None, state_path=state)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.discovery_done, 10)
        await wait_for(pilot, lambda: app.chat.slot_engine["A"] == ollama, 5)
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 60)
        from tui.chat.host import IDLE

        synth = app.core.hosts.get("synth")
        assert synth is None or synth.state == IDLE  # the default engine never loaded
    save_state(state, UIState(engine="ollama:9"))  # nothing there
    app = build_app(make_config(cfg), discover=None, state_path=state)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.discovery_done, 10)
        assert app.chat.slot_engine["A"] == "synth"
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 30)


def test_no_config_lists_a_server_on_its_default_port_in_a_real_terminal(
    model_path: Path, tmp_path: Path
) -> None:
    """The issue's own case: no config file at all, the Ollama emulator on 11434 (skipped
    when that port is taken here), `infertop` in tmux at 80x24: the server is named on
    screen soon after the first paint, and Ctrl+N switches slot A to it."""
    import shlex
    import subprocess

    from tests.support.tmux_pane import Tmux

    if not servers.port_is_free(11434):
        pytest.skip("port 11434 is in use on this machine")
    emu = ollama_emulator.OllamaEmulator(model_path, n_threads=1)
    _, stop = ollama_emulator.start_in_thread(emu, port=11434)
    root = Path(__file__).resolve().parents[2]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "TERM": "xterm-256color",
        "PYTHONPATH": str(root),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # empty: no config file
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    command = "env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command += f" {shlex.quote(sys.executable)} -m tui; sleep 30"
    tmux = Tmux(f"infertop-noconfig-{os.getpid()}")
    try:
        tmux("new-session", "-d", "-s", "e2e", "-x", "80", "-y", "24", command)
        tmux.wait(lambda s: "A ●" in s, 60, "the first paint")
        t_paint = time.monotonic()
        tmux.wait(lambda s: "ollama:11434" in s, 10, "the server found")
        took = time.monotonic() - t_paint
        sys.stderr.write(f"\n[ollama:11434 on screen {took:.2f} s after the first paint]\n")
        assert took < 2.0
        tmux("send-keys", "-t", "e2e", "C-n")
        screen = tmux.wait(lambda s: "A ● ollama:11434" in s, 10, "slot A on the server")
        tmux("send-keys", "-t", "e2e", "C-q")
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True)
        stop()
    assert "ollama" in screen
