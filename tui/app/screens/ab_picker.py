"""Ctrl+O with no engine chosen for slot B: a list of what B could be — the same model
on another engine first, then the servers discovery found and their models, then the
engines in config. Enter takes the highlighted one (the first: two keys to an A/B);
Esc turns nothing on."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.chat.catalog import Choice
from tui.core.safe_text import markup_label


class ABPicker(ModalScreen[Choice | None]):
    CSS_PATH = "ab_picker.tcss"
    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, choices: list[Choice]) -> None:
        super().__init__()
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("A/B: compare slot A with…", classes="title", markup=False)
            options = []
            for i, c in enumerate(self.choices):
                mark = "= " if c.same_model else "  "  # the same model on another engine
                # a model's name is the server's: the option list reads markup, so escaped
                options.append(Option(markup_label(mark + c.label(), 150), id=str(i)))
            yield OptionList(*options, id="ab-choices")
            yield Static(
                "Enter: A/B with it · Esc: cancel · = the same model", classes="hint", markup=False
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.choices[int(event.option.id or 0)])

    def action_close(self) -> None:
        self.dismiss(None)
