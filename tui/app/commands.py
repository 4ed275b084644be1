"""The command palette's chat commands: pick the engine of slot A or B, a model on a
server (``engine › model``), a GGUF file to open in-process, toggle A/B."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.app.screens.chat import ChatScreen
from tui.core.safe_text import terminal_label

if TYPE_CHECKING:
    from tui.engines.files.gguf_scan import GgufScan


class EngineCommands(Provider):
    """ "Engine A: NAME (kind)", "Engine B: …", "Model A: ENGINE › MODEL (details)",
    "Toggle A/B mode", "Discover local servers again" (on the chat screen)."""

    async def search(self, query: str) -> Hits:
        chat = self.screen
        if not isinstance(chat, ChatScreen):
            return
        matcher = self.matcher(query)
        for name, spec in chat.core.config.engines.items():
            for slot in ("A", "B"):
                text = terminal_label(f"Engine {slot}: {name} ({spec.kind})")
                score = matcher.match(text)
                if score > 0:
                    yield Hit(score, matcher.highlight(text), partial(chat.use_engine, slot, name))
        catalog = getattr(self.app, "catalog", None)
        for choice in catalog.model_choices(chat.core.config) if catalog is not None else []:
            assert choice.model is not None
            for slot in ("A", "B"):
                text = terminal_label(f"Model {slot}: {choice.label()}", 160)
                score = matcher.match(text)
                if score > 0:
                    pick = partial(chat.use_model, slot, choice.engine, choice.model)
                    yield Hit(score, matcher.highlight(text), pick)
        text = "Toggle A/B mode"
        if matcher.match(text) > 0:
            yield Hit(matcher.match(text), matcher.highlight(text), chat.action_toggle_ab)
        rediscover = getattr(self.app, "rediscover", None)
        text = "Discover local servers again"
        if rediscover is not None and chat.core.config.discovery.enabled:
            if matcher.match(text) > 0:
                yield Hit(matcher.match(text), matcher.highlight(text), rediscover)


class GgufCommands(Provider):
    """ "Open GGUF: NAME — arch · params · quant · size" for each GGUF file in the
    scanned folders (``[discovery] gguf_dirs``); choosing one loads it in-process in
    slot A. The folders are scanned once, when the palette first opens."""

    async def startup(self) -> None:
        import asyncio

        app = self.app
        if getattr(app, "gguf_scan", None) is None and hasattr(app, "scan_ggufs"):
            await asyncio.to_thread(app.scan_ggufs)

    def _files(self) -> GgufScan | None:
        scan: GgufScan | None = getattr(self.app, "gguf_scan", None)
        return scan if isinstance(self.screen, ChatScreen) else None

    async def discover(self) -> Hits:
        scan = self._files()
        for f in scan.files if scan is not None else []:
            text = terminal_label(f"Open GGUF: {f.name} — {f.details()}", 160)
            yield DiscoveryHit(text, partial(self.app.open_gguf, f), help=terminal_label(f.path))  # type: ignore[attr-defined]

    async def search(self, query: str) -> Hits:
        scan = self._files()
        matcher = self.matcher(query)
        for f in scan.files if scan is not None else []:
            text = terminal_label(f"Open GGUF: {f.name} — {f.details()}", 160)
            score = matcher.match(text)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(text),
                    partial(self.app.open_gguf, f),  # type: ignore[attr-defined]
                    help=terminal_label(f.path),
                )
