"""The command palette's chat commands: pick the engine of slot A or B, toggle A/B."""

from __future__ import annotations

from functools import partial

from textual.command import Hit, Hits, Provider

from tui.app.screens.chat import ChatScreen


class EngineCommands(Provider):
    """ "Engine A: NAME (kind)", "Engine B: …", "Toggle A/B mode" (on the chat screen)."""

    async def search(self, query: str) -> Hits:
        chat = self.screen
        if not isinstance(chat, ChatScreen):
            return
        matcher = self.matcher(query)
        for name, spec in chat.core.config.engines.items():
            for slot in ("A", "B"):
                text = f"Engine {slot}: {name} ({spec.kind})"
                score = matcher.match(text)
                if score > 0:
                    yield Hit(score, matcher.highlight(text), partial(chat.use_engine, slot, name))
        text = "Toggle A/B mode"
        if matcher.match(text) > 0:
            yield Hit(matcher.match(text), matcher.highlight(text), chat.action_toggle_ab)
