"""The command palette's chat commands: pick the engine of slot A or B, a model on a
server (``engine › model``), a GGUF file to open in-process, toggle A/B.

A line names engines, servers' models and files on disk: text from outside. The palette
reads a ``str`` line as markup (a model named ``[/]`` stopped the app), so each line is
given to it as literal ``Content`` (:func:`literal_hit`), and its help text escaped
(tui/core/safe_text.py). The app is reached as a :class:`~tui.app.app_api.DiscoveryHost`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content

from tui.app.app_api import DiscoveryHost, discovery_host
from tui.app.screens.chat import ChatScreen
from tui.core.safe_text import markup_label, terminal_label

if TYPE_CHECKING:
    from tui.engines.files.gguf_scan import GgufFile


def literal_line(matcher: Matcher, text: str) -> Content:
    """``text`` as the palette shows it, read as no markup, with the characters the
    query matched highlighted as Textual's own matcher does."""
    content = Content(text)
    score, offsets = matcher.fuzzy_search.match(matcher.query, text)
    if score:
        for offset in offsets:
            if not text[offset].isspace():
                content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


def literal_hit(
    matcher: Matcher,
    text: str,
    command: Callable[[], object],
    help: str = "",  # noqa: A002
) -> Hit | None:
    """A palette line for ``text`` (terminal-safe already) when the query matches it."""
    score = matcher.match(text)
    if score <= 0:
        return None
    return Hit(score, literal_line(matcher, text), command, text=text, help=help or None)


class EngineCommands(Provider):
    """ "Engine A: NAME (kind)", "Engine B: …", "Model A: ENGINE › MODEL (details)",
    "Toggle A/B mode", "Discover local servers again" (on the chat screen)."""

    async def search(self, query: str) -> Hits:
        chat = self.screen
        if not isinstance(chat, ChatScreen):
            return
        matcher = self.matcher(query)
        host = discovery_host(self.app)
        hits: list[Hit | None] = []
        for name, spec in chat.core.config.engines.items():
            for slot in ("A", "B"):
                text = terminal_label(f"Engine {slot}: {name} ({spec.kind})")
                hits.append(literal_hit(matcher, text, partial(chat.use_engine, slot, name)))
        for choice in host.catalog.model_choices(chat.core.config) if host is not None else []:
            assert choice.model is not None
            for slot in ("A", "B"):
                text = terminal_label(f"Model {slot}: {choice.label()}", 160)
                pick = partial(chat.use_model, slot, choice.engine, choice.model)
                hits.append(literal_hit(matcher, text, pick))
        hits.append(literal_hit(matcher, "Toggle A/B mode", chat.action_toggle_ab))
        if host is not None and chat.core.config.discovery.enabled:
            hits.append(literal_hit(matcher, "Discover local servers again", host.rediscover))
        for hit in hits:
            if hit is not None:
                yield hit


class GgufCommands(Provider):
    """ "Open GGUF: NAME — arch · params · quant · size" for each GGUF file in the
    scanned folders (``[discovery] gguf_dirs``); choosing one loads it in-process in
    slot A. The folders are scanned once, when the palette first opens."""

    async def startup(self) -> None:
        host = discovery_host(self.app)
        if host is not None and host.gguf_scan is None:
            await asyncio.to_thread(host.scan_ggufs)

    def _files(self) -> tuple[DiscoveryHost, list[GgufFile]] | None:
        host = discovery_host(self.app)
        if host is None or host.gguf_scan is None or not isinstance(self.screen, ChatScreen):
            return None
        return host, host.gguf_scan.files

    async def discover(self) -> Hits:
        found = self._files()
        for f in found[1] if found is not None else []:
            assert found is not None
            text = terminal_label(f"Open GGUF: {f.name} — {f.details()}", 160)
            yield DiscoveryHit(
                Content(text), partial(found[0].open_gguf, f), text, markup_label(f.path)
            )

    async def search(self, query: str) -> Hits:
        found = self._files()
        matcher = self.matcher(query)
        for f in found[1] if found is not None else []:
            assert found is not None
            text = terminal_label(f"Open GGUF: {f.name} — {f.details()}", 160)
            hit = literal_hit(matcher, text, partial(found[0].open_gguf, f), markup_label(f.path))
            if hit is not None:
                yield hit
