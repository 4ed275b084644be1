"""FoundEngines: the engines found on this machine, and slot A's engine at start.

A base of :class:`~tui.app.app.InfertopApp`: the servers discovery finds after the
first paint (and again from the palette; tui/app/discovery.py), the models they list,
whose process listens on their ports; the GGUF files found (palette: Open GGUF) and one
opened in-process; and slot A's engine at start — the one asked for, else the one used
last — which, when it was a server discovery found, waits for discovery and is taken
only if the server is back on a port the user's own process listens on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import App
from textual.worker import Worker, WorkerState

from tui.app.discovery import PortOwners
from tui.app.listeners import ListenerWatch
from tui.app.messages import ModelsListed, ServersFound
from tui.chat.catalog import Catalog
from tui.config import Config

if TYPE_CHECKING:
    from tui.app.screens.chat import ChatScreen
    from tui.engines.files.gguf_scan import GgufFile, GgufScan
    from tui.engines.servers.port_owner import PortOwner


class FoundEngines(App[None]):
    """See the module docstring; :class:`~tui.app.app.InfertopApp`'s ``__init__`` sets
    the state."""

    config: Config
    chat: ChatScreen
    catalog: Catalog  # servers found on this machine, their models
    discovery_done: bool
    rediscovering: bool  # the palette asked again: say when nothing is new
    gguf_scan: GgufScan | None  # GGUF files found (palette: Open GGUF)
    awaiting_remembered: str | None  # slot A waits for discovery to take this server
    port_owners: dict[int, PortOwner]  # where discovery found servers
    listeners: ListenerWatch  # whose listener each prompt to one is sent to

    @staticmethod
    def _initial_engine(config: Config, engine: str | None, remembered: str | None) -> str:
        """Slot A's engine: the one asked for (``infertop --url``), else the one used
        last if it is still configured, else the default."""
        if engine is not None and engine in config.engines:
            return engine
        return remembered if remembered in config.engines else config.default_engine

    def _start_discovery(self) -> None:
        from tui.app.discovery import discover_in_thread
        from tui.engines.servers.discovery import loopback_urls

        skip = loopback_urls(list(self.config.engines.values()))
        self.run_worker(
            lambda: discover_in_thread(self.config.discovery, skip, self.post_message),
            thread=True,
            group="discovery",
            exclusive=True,
            exit_on_error=False,
            description="discover local servers",
        )

    def rediscover(self) -> None:
        """The palette's "Discover local servers again": a server started since is added
        (the ones known stay as they are)."""
        if any(w.group == "discovery" and not w.is_finished for w in self.workers):
            return
        self.discovery_done = False
        self.rediscovering = True
        self._start_discovery()

    def on_servers_found(self, msg: ServersFound) -> None:
        from tui.app.discovery import found_note
        from tui.engines.servers.discovery import FOUND

        added = self.catalog.add_found(self.config, msg.findings)
        self.listeners.found |= {f.port for f in msg.findings if f.status == FOUND}
        self.discovery_done = True
        if added:
            self.notify(found_note(added), timeout=6)
        elif self.rediscovering:
            self.notify("no new local server found", timeout=3)
        self.rediscovering = False
        self._take_remembered()

    def on_port_owners(self, msg: PortOwners) -> None:
        self.port_owners.update(msg.owners)

    def _take_remembered(self) -> None:
        """After discovery (or when it failed): slot A on the server used last if it was
        found again on a port the user's own process listens on, else its engine loads
        as usual (a server found there under another owner is named in a notification,
        and used only once the user chooses it)."""
        name, self.awaiting_remembered = self.awaiting_remembered, None
        if name is None:
            return
        if name in self.config.engines and not self.chat.busy:
            owner = self.port_owners.get(int(name.rsplit(":", 1)[1]))
            if owner is not None and owner.is_yours():
                self.chat.use_engine("A", name)
                self.listeners.trust(owner)  # the user's own: each prompt checks it still is
                return
            from tui.app.discovery import remembered_note

            self.notify(remembered_note(name, owner), severity="warning", timeout=12)
        self.chat.ensure_loaded("A")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "discovery" and event.state == WorkerState.ERROR:
            self.discovery_done = True
            self._take_remembered()  # never left waiting on a discovery that failed

    def on_models_listed(self, msg: ModelsListed) -> None:
        self.catalog.models[msg.engine] = msg.models

    # -- GGUF files on this machine ----------------------------------------------------
    def scan_ggufs(self) -> GgufScan:
        """Scan the GGUF folders (blocking, bounded: in a thread) and keep the result."""
        from tui.engines.files.gguf_scan import scan_ggufs

        self.gguf_scan = scan_ggufs(self.config.discovery.gguf_roots())
        return self.gguf_scan

    def open_gguf(self, found: GgufFile) -> None:
        """Slot A runs ``found`` in-process (an engine ``gguf:NAME`` joins the config)."""
        from tui.chat.catalog import gguf_engine

        name = gguf_engine(self.config, found.path, found.name)
        self.chat.use_engine("A", name)
        if self.chat.slot_engine["A"] == name:
            self.notify(f"loading {found.name} ({found.details()}) in-process…", timeout=4)
