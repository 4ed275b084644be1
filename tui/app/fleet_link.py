"""FleetLink: the fleet screen (F3) and the chat on one of its endpoints.

A base of :class:`~tui.app.app.InfertopApp`: F3 opens the fleet screen (its source is
``infertop fleet``'s, else built from config: tui/fleet/build.py), kept while the chat
is shown so F3 returns to it; Enter on a row puts slot A of the chat on that endpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import App

from tui.app.screens.fleet import FleetScreen, FleetSource
from tui.config import Config
from tui.fleet.build import NoFleet, adopt_endpoint, build_fleet

if TYPE_CHECKING:
    from tui.app.screens.chat import ChatScreen
    from tui.fleet.rows import EndpointRow


class FleetLink(App[None]):
    """See the module docstring; :class:`~tui.app.app.InfertopApp`'s ``__init__`` sets
    the state."""

    config: Config
    chat: ChatScreen
    fleet_source: FleetSource | None
    fleet_interval_s: float
    _own_fleet: bool  # the fleet source is ours to close (not ``infertop fleet``'s)

    # -- the fleet ---------------------------------------------------------------------
    def action_fleet(self) -> None:
        """F3: the fleet screen (kept while the chat is shown, so F3 returns to it)."""
        if isinstance(self.screen, FleetScreen):
            return
        if self.fleet_source is None:
            try:
                self.fleet_source = build_fleet(self.config)
            except NoFleet as e:
                self.notify(str(e), severity="warning", timeout=8)
                return
            self._own_fleet = True
        if not self.is_screen_installed("fleet"):
            self.install_screen(FleetScreen(self.fleet_source, self.fleet_interval_s), "fleet")
        self.push_screen("fleet")

    def on_fleet_screen_endpoint_chosen(self, msg: FleetScreen.EndpointChosen) -> None:
        self.open_endpoint(msg.row)

    def on_fleet_screen_back_to_chat(self, msg: FleetScreen.BackToChat) -> None:
        self.show_chat()

    def show_chat(self) -> None:
        """Back from the fleet to the chat (its engine loads now if it has not)."""
        if isinstance(self.screen, FleetScreen):
            self.pop_screen()
        self.chat.ensure_loaded("A")

    def open_endpoint(self, row: EndpointRow) -> None:
        """Enter on a fleet row: slot A of the chat talks to that endpoint now (its spec
        joins the running config), so our TTFT shows beside the server's."""
        if row.url is None:
            self.notify(f"{row.name}: no URL known for this endpoint", severity="warning")
            return
        if self.chat.busy:
            self.notify("an answer is still streaming — Esc cancels it first", severity="warning")
            return
        name = adopt_endpoint(self.config, self.fleet_source, row).name
        if isinstance(self.screen, FleetScreen):
            self.pop_screen()
        if self.chat.slot_engine["A"] == name:
            self.chat.ensure_loaded("A")  # already this slot's engine (not loaded: fleet mode)
        else:
            self.chat.use_engine("A", name)
        kind = self.config.engines[name].kind
        self.notify(f"chat on {name} ({kind}) — F3 returns to the fleet", timeout=5)
