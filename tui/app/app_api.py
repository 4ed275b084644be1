"""What the chat screen and the command palette ask of the app, as a type.

The palette's providers and the chat screen's engine slots reach the app for the servers
discovery found (their catalog, whose process listens on their ports), to discover again,
for the GGUF files found and to open one. They cannot import the app's class (it imports
them), so they ask for this Protocol, which :class:`~tui.app.app.InfertopApp` implements
(mypy checks it there): a renamed method is a type error, not a palette line that
silently disappears. A test app that hosts the chat screen alone does not implement it;
there :func:`discovery_host` is None and the screen offers what its config has, nothing
found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tui.app.listeners import ListenerWatch
    from tui.chat.catalog import Catalog
    from tui.engines.files.gguf_scan import GgufFile, GgufScan


@runtime_checkable
class DiscoveryHost(Protocol):
    """The app's side of discovery, as the palette and the chat screen use it."""

    catalog: Catalog  # servers found, their models
    gguf_scan: GgufScan | None  # the GGUF files found (None until the palette scans)
    listeners: ListenerWatch  # whose process listens on each found server's port

    def rediscover(self) -> None:
        """Probe the ports of the table not yet known (the palette's command)."""

    def scan_ggufs(self) -> GgufScan:
        """Scan the GGUF folders (blocking: call it in a thread) and keep the result."""

    def open_gguf(self, found: GgufFile) -> None:
        """Slot A runs ``found`` in-process."""


def discovery_host(app: object) -> DiscoveryHost | None:
    """``app`` as a :class:`DiscoveryHost`, or None when it is not one."""
    return app if isinstance(app, DiscoveryHost) else None
