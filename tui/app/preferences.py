"""Preferences: the user's themes and keys, and what the app remembers for next time.

A base of :class:`~tui.app.app.InfertopApp`: our themes and the user's (Ctrl+T cycles
them; tui/app/themes.py), the user's keys (config's ``[ui.keys]``: tui/app/keys.py; F1
shows the keys as remapped), and the remembered state — the theme and slot A's engine —
saved for the next start (tui/app/state.py). What is wrong with a theme or a key is said
at start.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.notifications import SeverityLevel

from tui.app.keys import checked_keymap
from tui.app.screens.chat_engines import EngineChosen
from tui.app.state import UIState, save_state
from tui.app.themes import load_themes
from tui.config import Config


class Preferences(App[None]):
    """See the module docstring; :class:`~tui.app.app.InfertopApp`'s ``__init__`` sets
    the state."""

    state_path: Path | None
    state: UIState
    theme_dirs: list[Path]
    our_themes: list[str]
    startup_notes: list[tuple[str, SeverityLevel]]

    def _themes_and_keys(self, config: Config) -> None:
        """Ours and the user's themes, and the user's keys (what is wrong with either is
        said at start)."""
        registered, notes = load_themes(self, self.theme_dirs, self.state.theme or config.ui.theme)
        self.our_themes += registered
        keymap, key_notes = checked_keymap(config.ui.keys)
        self.startup_notes += [(n, "warning") for n in notes + key_notes]
        if keymap:
            self.set_keymap(keymap)

    def on_engine_chosen(self, msg: EngineChosen) -> None:
        self.remember(engine=msg.engine)

    # -- themes, state ----------------------------------------------------------------
    def remember(self, engine: str | None = None, theme: str | None = None) -> None:
        if engine:
            self.state.engine = engine
        if theme:
            self.state.theme = theme
        save_state(self.state_path, UIState(self.state.engine, self.state.theme))

    def action_next_theme(self) -> None:
        names = self.our_themes or sorted(self.available_themes)
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def watch_theme(self, theme: str) -> None:
        if self.is_running:
            self.remember(theme=theme)

    def action_toggle_help(self) -> None:
        """F1: the app's keys, grouped, as remapped (tui/app/screens/help.py)."""
        from tui.app.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        bound: dict[str, str] = {}
        for key, active in self.active_bindings.items():
            if active.binding.id and active.binding.id not in bound:
                bound[active.binding.id] = key
        self.push_screen(HelpScreen(bound))
