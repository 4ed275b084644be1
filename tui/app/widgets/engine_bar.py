"""EngineBar: engine, model and state for slot A (and B in A/B mode), on one line."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

STATE_STYLE = {
    "idle": "dim",
    "loading": "bold yellow",
    "ready": "bold green",
    "generating": "bold cyan",
    "error": "bold red",
}


@dataclass
class SlotView:
    engine: str
    kind: str = ""
    model: str = ""
    state: str = "idle"
    detail: str = ""


class EngineBar(Static):
    """Shows ``A ● name · kind · model · state`` (and B when A/B mode is on)."""

    DEFAULT_CSS = """
    EngineBar { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    """

    def __init__(self, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__("", **kw)
        self.slots: dict[str, SlotView] = {}
        self.ab = False

    def set_slot(self, slot: str, view: SlotView) -> None:
        self.slots[slot] = view
        self.refresh_bar()

    def set_state(self, slot: str, state: str, detail: str = "") -> None:
        if slot in self.slots:
            self.slots[slot].state = state
            self.slots[slot].detail = detail
            self.refresh_bar()

    def set_ab(self, on: bool) -> None:
        self.ab = on
        self.refresh_bar()

    def plain(self) -> str:
        return self._text().plain

    def _text(self) -> Text:
        text = Text()
        for slot in ("A", "B") if self.ab else ("A",):
            view = self.slots.get(slot)
            if view is None:
                continue
            if text:
                text.append("  │  ", style="dim")
            text.append(f"{slot} ", style="bold")
            text.append("● ", style=STATE_STYLE.get(view.state, ""))
            text.append(view.engine, style="bold")
            if view.kind:
                text.append(f" · {view.kind}", style="dim")
            if view.model:
                text.append(f" · {view.model}")
            text.append(f" · {view.state}", style=STATE_STYLE.get(view.state, ""))
            if view.detail and (view.state == "error" or not self.ab):
                text.append(f" ({view.detail})", style="dim" if view.state != "error" else "red")
        return text

    def refresh_bar(self) -> None:
        self.update(self._text(), layout=False)  # always one line
