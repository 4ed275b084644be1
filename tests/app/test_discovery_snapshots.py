"""80x24 snapshots of what discovery adds: Ctrl+O's choice of B, and the palette's
``engine › model`` lines. Found servers are fixed here (ports and models written out, as
the fleet snapshots fix their rows): the snapshot checks layout and labels; the Pilot
tests in test_discovery_ui.py find real servers."""

from __future__ import annotations

import asyncio
import time

from textual.command import CommandList, CommandPalette
from textual.widgets import Input

from tests.app.app_support import gen
from tui.app.screens.ab_picker import ABPicker
from tui.app.widgets.engine_bar import EngineBar
from tui.app.widgets.prompt import PromptInput
from tui.engines.base import EngineSpec
from tui.engines.servers.discovery import CLOSED, FOUND, PortFinding
from tui.engines.servers.server_models import ServerModel

# slot A: a synthetic engine named as if it ran SmolLM2's GGUF (no model loads)
CONFIG = """
[engines.smol]
kind = "synthetic"
model = "SmolLM2-135M-Instruct.Q4_1.gguf"
options = { tokens_per_s = 200, ttft_ms = 15 }
"""
SMOL_FILE = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"


def _spec(kind: str, port: int, model: str) -> EngineSpec:
    return EngineSpec(f"{kind}:{port}", kind, url=f"http://127.0.0.1:{port}", model=model)


FINDINGS = [
    PortFinding(11434, FOUND, spec=_spec("ollama", 11434, "smollm2:135m")),
    PortFinding(8080, FOUND, spec=_spec("llama-server", 8080, SMOL_FILE)),
    PortFinding(8000, FOUND, spec=_spec("vllm", 8000, "Qwen/Qwen2.5-7B-Instruct")),
    PortFinding(30000, CLOSED, "nothing listening"),
]
MODELS = {
    "ollama:11434": [
        ServerModel("smollm2:135m", 98_362_432, "135M", "Q4_1", 2048, "CPU"),
        ServerModel("qwen2.5:7b", 4_683_087_332, "7.6B", "Q4_K_M"),
        ServerModel("llama3.2:3b", 2_019_393_189, "3.2B", "Q4_K_M"),
    ],
    "llama-server:8080": [ServerModel(SMOL_FILE, 96_576_768, "135M", "Q4_1", 2048)],
    "vllm:8000": [ServerModel("Qwen/Qwen2.5-7B-Instruct", context=32768)],
}


async def _searched(pilot, text: str, hits: int) -> None:  # type: ignore[no-untyped-def]
    """Type ``text`` into the open palette and wait until its search has finished with
    at least ``hits`` lines (a fixed sleep drew a half-filled list on a busy machine)."""
    palette = pilot.app.screen
    assert isinstance(palette, CommandPalette)
    for field in palette.query(Input):
        field.cursor_blink = False  # a blinking cursor is drawn, or not, by the clock
    await pilot.press(*text)
    group = palette._GATHER_COMMANDS_GROUP
    deadline = time.monotonic() + 30
    while True:
        searching = any(
            w.node is palette and w.group == group and not w.is_finished for w in pilot.app.workers
        )
        lines = palette.query_one(CommandList).option_count
        if not searching and lines >= hits and palette.has_class("-ready"):
            break
        assert time.monotonic() < deadline, f"the palette's search did not end ({lines} lines)"
        await asyncio.sleep(0.05)
    await pilot.pause(0.2)


async def _found(pilot) -> None:  # type: ignore[no-untyped-def]
    """The app as discovery leaves it (fixed findings), slot A ready, no toasts."""
    app = pilot.app
    deadline = time.monotonic() + 30
    while "ready" not in app.chat.query_one(EngineBar).plain():
        assert time.monotonic() < deadline, "engine did not load"
        await asyncio.sleep(0.05)
    app.catalog.add_found(app.config, FINDINGS)
    app.catalog.models.update(MODELS)
    app.chat.query_one(EngineBar).set_state("A", "ready", "loaded in 300 ms")
    app.chat.query_one(PromptInput).cursor_blink = False
    app.clear_notifications()
    await pilot.pause(0.1)


def test_ab_choice_80x24(snap_compare, make_config, build_app):  # type: ignore[no-untyped-def]
    app = build_app(make_config('default_engine = "smol"\n' + gen() + CONFIG))

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _found(pilot)
        await pilot.press("ctrl+o")
        while not isinstance(app.screen, ABPicker):
            await asyncio.sleep(0.05)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run)


def test_palette_models_80x24(snap_compare, make_config, build_app):  # type: ignore[no-untyped-def]
    app = build_app(make_config('default_engine = "smol"\n' + gen() + CONFIG))

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _found(pilot)
        await pilot.press("ctrl+p")
        while not isinstance(app.screen, CommandPalette):
            await asyncio.sleep(0.05)
        await _searched(pilot, "model a: ollama", 3)  # the emulator's three models

    assert snap_compare(app, terminal_size=(80, 24), run_before=run)


def test_open_gguf_80x24(snap_compare, make_config, build_app):  # type: ignore[no-untyped-def]
    """The palette's Open GGUF lines (a fixed scan: the files' facts written out)."""
    from pathlib import Path

    from tui.engines.files.gguf_scan import GgufFile, GgufScan

    app = build_app(make_config('default_engine = "smol"\n' + gen() + CONFIG))
    hub = "/home/u/.cache/huggingface/hub"
    app.gguf_scan = GgufScan(
        [
            GgufFile(
                Path(SMOL_FILE),
                "SmolLM2-135M-Instruct.Q4_1.gguf",
                98_362_432,
                "/models",
                "llama",
                134_515_008,
                "Q4_1",
            ),
            GgufFile(
                Path("/home/u/.ollama/models/blobs/sha256-2bada8a7"),
                "qwen2.5:7b",
                4_683_087_332,
                "/home/u/.ollama/models",
                "qwen2",
                7_615_616_512,
                "Q4_K_M",
            ),
            GgufFile(
                Path(
                    hub + "/models--bartowski--Llama-3.2-3B-Instruct-GGUF/snapshots/"
                    "5ab33fa/Llama-3.2-3B-Instruct-Q8_0.gguf"
                ),
                "Llama-3.2-3B-Instruct-Q8_0.gguf",
                3_421_899_104,
                hub,
                "llama",
                3_212_749_888,
                "Q8_0",
            ),
        ]
    )

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _found(pilot)
        await pilot.press("ctrl+p")
        while not isinstance(app.screen, CommandPalette):
            await asyncio.sleep(0.05)
        await _searched(pilot, "open gguf", 3)  # the three files

    assert snap_compare(app, terminal_size=(80, 24), run_before=run)


async def test_a_model_named_with_control_sequences_is_shown_safe(make_config, build_app):  # type: ignore[no-untyped-def]
    """A server's model id of terminal control sequences (OSC 52, OSC 0, CSI, C1, BEL):
    the palette and Ctrl+O's list show it, made visible, never obeyed."""
    from tests.app.screen_text import screen_text

    evil = "evil\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x07\x1b[2J\x9b31m\x07name"
    app = build_app(make_config('default_engine = "smol"\n' + gen() + CONFIG))
    async with app.run_test(size=(80, 24)) as pilot:
        await _found(pilot)
        app.catalog.models["vllm:8000"] = [ServerModel(evil, context=4096)]
        await pilot.press("ctrl+p")
        while not isinstance(app.screen, CommandPalette):
            await asyncio.sleep(0.05)
        await pilot.press(*"evil")
        deadline = time.monotonic() + 15
        while "Model A: vllm:8000 › evil" not in screen_text(app):
            assert time.monotonic() < deadline, screen_text(app)
            await pilot.pause(0.1)
        text = screen_text(app)
        assert "␛]52;c;" in text and not any(c in text for c in ("\x1b", "\x9b", "\x07"))
        await pilot.press("escape")
        await pilot.pause(0.2)
        await pilot.press("ctrl+o")
        while not isinstance(app.screen, ABPicker):
            await asyncio.sleep(0.05)
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "vllm:8000 › evil␛]52" in text and "\x1b" not in text
