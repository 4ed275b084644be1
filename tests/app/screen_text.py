"""Plain text of what the screen shows (for assertions on what a user would read)."""

from __future__ import annotations

from textual.app import App


def screen_text(app: App) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text.rstrip() for strip in strips)
