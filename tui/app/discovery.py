"""The TUI's discovery: after the first paint, a thread probes the loopback ports
(tui/engines/discovery.py) and lists each found server's models
(tui/engines/server_models.py); what it finds reaches the app as Messages only.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from tui.app.messages import ModelsListed, ServersFound
from tui.config import DiscoverySettings
from tui.engines.base import EngineError


def discover_in_thread(
    settings: DiscoverySettings, skip_urls: list[str], post: Callable[[Message], object]
) -> None:
    """Thread worker: probe (not the ports of ``skip_urls``: engines already in config),
    post the findings, then each found server's models."""
    from tui.engines.discovery import FOUND, discover
    from tui.engines.server_models import list_server_models

    findings = discover(settings.port_list(), settings.timeout_s, skip_urls=skip_urls)
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
