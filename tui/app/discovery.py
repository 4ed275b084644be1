"""The TUI's discovery: after the first paint, a thread probes the loopback ports
(tui/engines/servers/discovery.py), says whose process listens on each port where a server was
found (tui/engines/servers/port_owner.py) and lists each found server's models
(tui/engines/servers/server_models.py); what it finds reaches the app as Messages only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.message import Message

from tui.app.messages import ModelsListed, ServersFound
from tui.config import DiscoverySettings
from tui.engines.base import EngineError

if TYPE_CHECKING:
    from tui.engines.servers.port_owner import PortOwner


class PortOwners(Message):
    """Who listens on each port where discovery found a server (posted before the
    findings themselves, so they are known when the findings arrive)."""

    def __init__(self, owners: dict[int, PortOwner]) -> None:
        super().__init__()
        self.owners = owners


def discover_in_thread(
    settings: DiscoverySettings, skip_urls: list[str], post: Callable[[Message], object]
) -> None:
    """Thread worker: probe (not the ports of ``skip_urls``: engines already in config),
    post whose process listens where a server answered, the findings, then each found
    server's models."""
    from tui.engines.servers.discovery import FOUND, discover
    from tui.engines.servers.port_owner import port_owners
    from tui.engines.servers.server_models import list_server_models

    findings = discover(settings.port_list(), settings.timeout_s, skip_urls=skip_urls)
    post(PortOwners(port_owners([f.port for f in findings if f.status == FOUND])))
    post(ServersFound(findings))
    for f in findings:
        if f.status != FOUND or f.spec is None:
            continue
        try:
            models = list_server_models(f.spec, max(2.0, settings.timeout_s))
        except EngineError:
            continue
        post(ModelsListed(f.spec.name, models))


def found_note(names: list[str]) -> str:
    """The notification for engines discovery added."""
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"found {shown} — Ctrl+N switches, Ctrl+O compares, Ctrl+P lists models"


def remembered_note(name: str, owner: PortOwner | None) -> str:
    """The notification when the server used last is back but not taken: why, and how
    to take it."""
    why = owner.describe() if owner is not None else "its owner is not known"
    return (
        f"{name}, used last time, is running again, but {why}: no prompt goes there"
        " until you choose it (Ctrl+N, or its name in Ctrl+P)"
    )
