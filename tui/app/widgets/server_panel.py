"""ServerPanel: what the engine's server reports about itself (hidden when nothing)."""

from __future__ import annotations

from textual.widgets import Static

from tui.core.safe_text import markup_safe


class ServerPanel(Static):
    DEFAULT_CSS = """
    ServerPanel { height: auto; border: round $accent; padding: 0 1; display: none; }
    """

    def on_mount(self) -> None:
        self.border_title = "server"

    def show_lines(self, lines: list[str] | None) -> None:
        """``None`` hides the panel (the engine has no server-side metrics). The lines
        quote the server (model names, scrape errors): terminal-safe, no markup read."""
        self.display = lines is not None
        if lines is not None:
            self.update(markup_safe("\n".join(lines)))

    @property
    def text(self) -> str:
        return str(self.render())
