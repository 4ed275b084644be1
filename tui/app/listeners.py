"""Whose process listens on a found server's port, asked again before each prompt.

Discovery found a server on a loopback port, and the prompts went there because its
listener was trusted: the user's own process at start (the server used last, taken again
only then: docs/discovery.md), or whoever listened when the user chose it. A server can
stop and start again, and between the two any local user may take the free port: the
next prompt, sent over a fresh connection (a pooled one closed by the old server is
replaced without a word, so no failure is seen), would reach that user. So before each
prompt to a server discovery found, the port's listener is read again
(tui/engines/servers/port_owner.py, ~4 ms with 1,400 sockets; in a thread): when its
owner is not the one trusted, the prompt is not sent and the user is told; choosing the
server again (Ctrl+N, the palette, Ctrl+O's list) trusts whoever listens there then.

What cannot be told is not held against a server: on a system that does not say (macOS,
Windows), or with nothing listening (the send then fails to connect, and nothing leaves).
Engines from config are the user's own addresses and are not checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from tui.engines.base import EngineSpec
from tui.engines.servers.port_owner import PortOwner, port_owners

LOOPBACK = ("127.0.0.1", "localhost")  # the addresses discovery finds servers at


def loopback_port(spec: EngineSpec) -> int | None:
    """The port of ``spec``'s URL when it is on this machine's loopback, else None."""
    if not spec.url:
        return None
    try:
        parts = urlsplit(spec.url)
        return parts.port if parts.hostname in LOOPBACK else None
    except ValueError:
        return None


class ListenerWatch:
    """The listeners trusted per found port, and the check before a prompt."""

    def __init__(self, read: Callable[[list[int]], dict[int, PortOwner]] = port_owners) -> None:
        self._read = read
        self.found: set[int] = set()  # ports where discovery found a server
        self._trusted: dict[int, frozenset[int]] = {}  # port -> its listeners' uids

    def trust(self, owner: PortOwner) -> None:
        """Trust the listeners ``owner`` names (read at start: the user's own)."""
        if owner.known and owner.uids:
            self._trusted[owner.port] = owner.uids

    def chosen(self, spec: EngineSpec) -> None:
        """The user chose this engine: whoever listens on its port when its next prompt
        goes is trusted (read then)."""
        port = loopback_port(spec)
        if port is not None:
            self._trusted.pop(port, None)

    def ports(self, specs: Iterable[EngineSpec]) -> list[int]:
        """The found servers' ports among ``specs``: those a prompt re-checks."""
        ports = {loopback_port(spec) for spec in specs}
        return sorted(p for p in ports if p is not None and p in self.found)

    def changed(self, ports: list[int]) -> list[PortOwner]:
        """Blocking (a thread): read the listeners of ``ports`` now; those whose owner is
        not the one trusted. A port with none trusted yet trusts what it reads."""
        if not ports:
            return []
        now = self._read(ports)
        out = []
        for port in ports:
            owner = now.get(port, PortOwner(port, known=False))
            if not owner.known or not owner.uids:
                continue  # cannot be told, or nothing listens: nothing to hold against it
            trusted = self._trusted.setdefault(port, owner.uids)
            if owner.uids == trusted:
                continue
            if owner.is_yours():  # the user's own process: trusted, as at start
                self._trusted[port] = owner.uids
            else:
                out.append(owner)
        return out


def changed_note(name: str, owner: PortOwner) -> str:
    """The notification when a prompt was not sent: whose the port is now, and how to
    send there all the same."""
    return (
        f"{name}: the process listening on port {owner.port} is not the one this session "
        f"used (now: {owner.describe()}): the prompt was not sent. Choose {name} again "
        "(Ctrl+N, or its name in Ctrl+P) to send to whoever listens there now"
    )
