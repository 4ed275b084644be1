"""EngineBar: engine, model and state for slot A (and B in A/B mode), on one line."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from tui.core.safe_text import terminal_label

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
    kind_short: str = ""  # the kind's shorter name, taken first when the line is full


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

    def on_resize(self) -> None:
        self.refresh_bar()

    def _text(self) -> Text:
        slots = [s for s in (("A", "B") if self.ab else ("A",)) if s in self.slots]
        width = self.content_size.width if self.is_mounted else 0
        gap = "  │  "
        each = (width - len(gap) * (len(slots) - 1)) // max(1, len(slots)) if width else 0
        text = Text()
        for slot in slots:
            if text:
                text.append(gap, style="dim")
            text.append_text(slot_text(slot, self.slots[slot], self.ab, each))
        return text

    def refresh_bar(self) -> None:
        self.update(self._text(), layout=False)  # always one line


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def slot_text(slot: str, view: SlotView, ab: bool, width: int = 0) -> Text:
    """``A ● name · kind · model · state (detail)`` in ``width`` cells (0: no limit).

    The state always shows; as the width shrinks the kind takes its shorter name (a
    llama.cpp build's: "llama.cpp (prebuilt)"), then the detail goes — but while the
    engine loads, its detail is the load's progress, and the kind goes first — then the
    model is shortened (a path to its file name, then clipped) and dropped, then the
    kind, and last the engine's name is clipped."""
    state_style = STATE_STYLE.get(view.state, "")
    detail = view.detail if view.detail and (view.state == "error" or not ab) else ""
    # the model's name and an error's reason come from a server: terminal-safe
    detail = terminal_label(detail, 500)
    model = terminal_label(view.model)
    kind = terminal_label(view.kind)
    engine = terminal_label(view.engine)

    def build() -> Text:
        t = Text()
        t.append(f"{slot} ", style="bold")
        t.append("● ", style=state_style)
        t.append(engine, style="bold")
        if kind:
            t.append(f" · {kind}", style="dim")
        if model:
            t.append(f" · {model}")
        t.append(f" · {view.state}", style=state_style)
        if detail:
            t.append(f" ({detail})", style="dim" if view.state != "error" else "red")
        return t

    text = build()
    if not width or text.cell_len <= width:
        return text
    if view.kind_short:
        kind = terminal_label(view.kind_short)
        text = build()
        if text.cell_len <= width:
            return text
    if view.state == "loading" and detail:
        kind = ""
        text = build()
        if text.cell_len <= width:
            return text
    if view.state != "error":  # an error's reason is worth more than the model's name
        detail = ""
    else:
        model = kind = ""
    text = build()
    if text.cell_len > width and model:
        if model.startswith(("/", "~", "./")) or "\\" in model:  # a file path: its name
            model = model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        over = build().cell_len - width
        model = _clip(model, len(model) - over) if len(model) - over >= 8 else ""
        text = build()
    if text.cell_len > width and kind:
        kind = ""
        text = build()
    if text.cell_len > width and detail:
        detail = _clip(detail, max(8, len(detail) - (text.cell_len - width)))
        text = build()
    if text.cell_len > width:
        engine = _clip(engine, max(4, len(engine) - (text.cell_len - width)))
        text = build()
    return text
