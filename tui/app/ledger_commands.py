"""The palette's ledger commands: "History: past requests", "Usage: who used the servers"
and, on the chat screen, "Usage: this engine, last 24 h" (tui/app/screens/usage.py and
history.py read the request ledger)."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.app.screens.chat import ChatScreen
from tui.chat.core import ChatCore


def engine_upstream(core: ChatCore) -> str:
    """Where slot A's engine sends its requests, as the ledger names it (its server's
    URL, or "in-process")."""
    name = core.engine_of("A")
    host = core.hosts.get(name)
    if host is not None and host.engine is not None:
        return host.engine.where().upstream
    spec = core.config.engines[name]
    return spec.url.rstrip("/") if spec.url else "in-process"


class LedgerCommands(Provider):
    def _commands(self) -> list[tuple[str, object, str]]:
        from tui.app.screens.history import HistoryScreen
        from tui.app.screens.usage import UsageScreen

        app = self.app
        if getattr(app, "ledger", None) is None:
            return []
        out: list[tuple[str, object, str]] = [
            (
                "History: past requests",
                partial(app.push_screen, HistoryScreen()),
                "every request the ledger keeps, newest first; filter by client, model, state",
            ),
            (
                "Usage: who used the servers",
                partial(app.push_screen, UsageScreen("day")),
                "per client and per model over the last hour, day or week",
            ),
        ]
        if isinstance(self.screen, ChatScreen):
            upstream = engine_upstream(self.screen.core)
            out.append(
                (
                    "Usage: this engine, last 24 h",
                    partial(app.push_screen, UsageScreen("day", upstream)),
                    f"every client's requests to {upstream}, from the ledger",
                )
            )
        return out

    async def discover(self) -> Hits:
        for text, run, help_text in self._commands():
            yield DiscoveryHit(text, run, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, run, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), run, help=help_text)  # type: ignore[arg-type]
