"""F1: the app's own keys, grouped by what they are for, then the prompt's editing keys.

Keys are read from the bindings as they are now (``[ui.keys]`` remaps show as remapped),
so the screen never lists a key that does not do what it says.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from tui.core.safe_text import terminal_label

# (group, binding id or None for keys handled by a widget, key when no id, what it does)
GROUPS: tuple[tuple[str, tuple[tuple[str | None, str, str], ...]], ...] = (
    (
        "chat",
        (
            (None, "Enter", "send the prompt (to both engines in A/B mode)"),
            (None, "Ctrl+J / Shift+Enter", "new line in the prompt"),
            (None, "↑ / ↓", "earlier prompts (on the first / last line)"),
            ("cancel", "Esc", "cancel the answer that is streaming (what came stays)"),
            ("clear", "Ctrl+L", "clear the conversation (the session log keeps it)"),
            (
                "reasoning",
                "Ctrl+R",
                "unfold (and fold again) the reasoning of the latest answer, when its "
                "model thought; a click on the fold's line does it too",
            ),
        ),
    ),
    (
        "engines",
        (
            ("next_engine", "Ctrl+N", "next engine in slot A (it loads in the background)"),
            (
                None,
                "Ctrl+P",
                "command palette: an engine or a server's model for slot A or B, "
                "or a GGUF file to open",
            ),
        ),
    ),
    (
        "A/B",
        (
            (
                "ab",
                "Ctrl+O",
                "A/B mode: one prompt to two engines side by side, B/A ratios (the first "
                "time, pick B among the servers found: Enter takes the same model)",
            ),
        ),
    ),
    (
        "panels",
        (
            (
                "panels",
                "F2",
                "narrow terminal: swap the chat for the full panels (the engine's inside "
                "in full among them) and back",
            ),
            ("fleet", "F3", "the fleet screen (every endpoint in config) and back"),
        ),
    ),
    ("bench", (("bench", "b", "the bench screen: run a benchmark from here"),)),
    ("themes", (("theme", "Ctrl+T", "next colour theme (remembered)"),)),
    ("app", (("help", "F1", "this help (Esc closes it)"), ("quit", "Ctrl+Q", "quit"))),
)


def key_text(key: str) -> str:
    """'ctrl+n' -> 'Ctrl+N', 'f2' -> 'F2', 'escape' -> 'Esc' (several keys: 'a / b')."""
    names = {
        "escape": "Esc",
        "up": "↑",
        "down": "↓",
        "left": "←",
        "right": "→",
        "pageup": "PgUp",
        "pagedown": "PgDn",
        "backspace": "Backspace",
        "delete": "Del",
    }
    out = []
    for one in key.split(","):
        parts = one.strip().split("+")
        shown = [p.capitalize() if len(p) > 1 else p for p in parts[:-1]]
        last = parts[-1]
        if last in names:
            last = names[last]
        elif len(last) == 1 and len(parts) > 1:
            last = last.upper()
        elif last.startswith("f") and last[1:].isdigit():
            last = last.upper()
        elif len(last) > 1:
            last = last.capitalize()
        out.append("+".join([*shown, last]))
    return " / ".join(out)


def app_keys(bound: dict[str, str]) -> Table:
    """The grouped table; ``bound``: binding id -> its key now."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for group, rows in GROUPS:
        first = True
        for binding_id, default, what in rows:
            key = key_text(bound[binding_id]) if binding_id in bound else default
            # a key as the user's [ui.keys] wrote it: Text (a Rich table reads markup
            # in a str cell), terminal-safe
            table.add_row(group if first else "", Text(terminal_label(key)), what)
            first = False
    return table


def editing_keys(bindings: Iterable[Binding]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    seen: set[str] = set()
    for b in bindings:
        if not b.description or b.description in seen:
            continue
        seen.add(b.description)
        table.add_row(Text(terminal_label(key_text(b.key))), b.description)
    return table


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "help.tcss"
    BINDINGS = [
        Binding("escape", "close", "Close", show=False),
        Binding("f1", "close", "Close", show=False),
        Binding("q", "close", "Close", show=False),
    ]

    def __init__(self, bound: dict[str, str]) -> None:
        super().__init__()
        self.bound = bound

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("infertop keys", style="bold"), classes="title")
            yield Static(app_keys(self.bound), id="app-keys", markup=False)
            yield Static(Text("editing the prompt", style="bold"), classes="title")
            yield Static(editing_keys(_text_area_bindings()), id="edit-keys", markup=False)
            yield Static(
                Text("Esc or F1 closes this; README.md has the same list.", style="dim"),
                classes="title",
            )

    def action_close(self) -> None:
        self.dismiss(None)

    @property
    def text(self) -> str:
        """Everything the screen says, as plain text (tests)."""
        import io

        from rich.console import Console

        console = Console(width=120, file=io.StringIO())
        console.print(app_keys(self.bound))
        console.print(editing_keys(_text_area_bindings()))
        out = console.file
        assert isinstance(out, io.StringIO)
        return out.getvalue()


def _text_area_bindings() -> list[Binding]:
    return [b for b in TextArea.BINDINGS if isinstance(b, Binding)]
