"""What one client may hold of the proxy: connections (all together and per address) and
bytes of request bodies (all clients together).

Each client connection takes a slot on arrival (:class:`ClientSlots`): at most
``max_clients`` open at once, and at most ``per_address`` of them from one client
address (an IPv4 address, or an IPv6 /64: one host has a whole /64 to pick from), so a
few silent sockets from one address cannot lock everyone else out. A request body is
read whole before it goes upstream; the bytes of all bodies held at once, finished or
not, come out of one :class:`BodyBudget`: a body that would pass it is refused (503) and
its connection closed, so many clients each sending most of a large body cannot grow the
proxy's memory past the budget.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from typing import Any


def address_key(peer: Any) -> str:
    """The client address a connection counts against: its IPv4 address (an IPv4-mapped
    IPv6 one unmapped), or its IPv6 address's /64; the text itself for anything else."""
    host = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class ClientSlots:
    """Client connections open: at most ``total``, at most ``per_address`` from one
    address (:func:`address_key`)."""

    def __init__(self, total: int, per_address: int) -> None:
        self.total = total
        self.per_address = per_address
        self.open = 0
        self.by_address: Counter[str] = Counter()

    def take(self, key: str) -> str | None:
        """A slot for a connection from ``key``; None when given, else why not (words)."""
        if self.open >= self.total:
            return "too many clients"
        if self.by_address[key] >= self.per_address:
            return f"too many connections from your address (at most {self.per_address})"
        self.open += 1
        self.by_address[key] += 1
        return None

    def give(self, key: str) -> None:
        """The connection from ``key`` that took a slot closed."""
        self.open -= 1
        left = self.by_address[key] - 1
        if left > 0:
            self.by_address[key] = left
        else:
            del self.by_address[key]


class BodyBudget:
    """Bytes of request bodies held at once, all clients together (see the module
    docstring). ``used`` never passes ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        """Hold ``n`` more bytes; False (nothing held) when that would pass the limit."""
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        """``n`` bytes held before are let go of."""
        self.used -= n
