"""What one client may hold of the proxy: connection slots, and the bytes of request bodies.

A client is counted as its *peer* (:func:`peer_key`): on loopback, the local user who
owns its socket (asked of the kernel by netlink, :func:`tui.proxy.peer.owner_now`) —
any local user can connect from 127.0.0.2, .3, …, so there the address says nothing —;
otherwise its address (an IPv4 address, or an IPv6 /64: one host has a whole /64 to pick
from). Where the owner cannot be asked (netlink refused, no socket table), a loopback
peer is its address, as before.

**Connections** (:class:`ClientSlots`): at most ``total`` open, at most ``per_peer`` of
one peer. A connection that would pass either closes the connection *idle between
requests* the longest (connected, no request in flight or arriving) — of its own peer
when its peer is full, of anyone's when all are — and takes its place; only when none is
idle is it refused (503). Closing a kept-alive connection between requests is ordinary
HTTP (a client opens another), so silent sockets cost their peer its own slots, never
anyone else's.

**Request bodies** (:class:`BodyBudget`): a body is read whole before it goes upstream.
Its bytes are charged as they arrive (a declared Content-Length holds nothing) and held
until the upstream has answered (the request may be sent again until then): all bodies
together at most ``limit`` bytes, one peer's at most ``per_peer``. A body whose next bytes
would pass either makes room: the body still arriving that made no progress the longest
(its own peer's when its peer's share is full) is dropped — its client gets 503 and is
closed — and only when no other body is arriving is the newcomer refused (503). So a
flood of heads, or of real bodies left unfinished, costs at most the budget and locks
nobody out.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

Evict = Callable[[], None]  # drop a body still arriving, refuse its client (503)


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


def peer_key(peer: Any, owner: int | None) -> str:
    """Who a connection counts as (see the module docstring): ``uid N`` when the owner
    of its loopback socket is known, else its address (:func:`address_key`)."""
    return f"uid {owner}" if owner is not None else address_key(peer)


class Slotted(Protocol):
    """A connection holding a slot: its peer, whether it is idle between requests now
    (it says so itself: a request beginning costs no more than that), and how it is
    closed to make room."""

    key: str
    idle: bool

    def evict(self) -> None:
        """Close now: its slot was given to another (the slots have let it go)."""


class ClientSlots:
    """Client connections open: at most ``total``, at most ``per_peer`` of one peer,
    the longest idle closed to make room (see the module docstring)."""

    def __init__(self, total: int, per_peer: int) -> None:
        self.total = total
        self.per_peer = per_peer
        self.open = 0
        self.by_peer: Counter[str] = Counter()
        self._idle: dict[Slotted, None] = {}  # oldest idle first (insertion order)
        self._idle_by_peer: dict[str, dict[Slotted, None]] = {}
        self.evicted = 0  # idle connections closed to make room

    def take(self, conn: Slotted) -> str | None:
        """A slot for ``conn``, idle from now (it clears its ``idle`` when a request
        begins, and :meth:`idle` says when it is idle again); None when given, else why
        not (words)."""
        key = conn.key
        if self.by_peer[key] >= self.per_peer and not self._evict(self._idle_by_peer.get(key)):
            who = "your user" if key.startswith("uid ") else "your address"
            return f"too many connections from {who} (at most {self.per_peer}), none idle"
        if self.open >= self.total and not self._evict(self._idle):
            return "too many clients, none idle"
        self.open += 1
        self.by_peer[key] += 1
        self.idle(conn)
        return None

    def _evict(self, pool: dict[Slotted, None] | None) -> bool:
        """Close the longest idle connection of ``pool`` (those busy since they were
        listed are taken off the list on the way); False: none."""
        while pool:
            victim = next(iter(pool))
            if not victim.idle:
                self._unlist(victim)
                continue
            self.give(victim)
            self.evicted += 1
            victim.evict()
            return True
        return False

    def idle(self, conn: Slotted) -> None:
        """``conn`` is idle between requests again (the newest idle)."""
        self._unlist(conn)
        self._idle[conn] = None
        self._idle_by_peer.setdefault(conn.key, {})[conn] = None

    def _unlist(self, conn: Slotted) -> None:
        if self._idle.pop(conn, 0) is None:
            peers = self._idle_by_peer[conn.key]
            del peers[conn]
            if not peers:
                del self._idle_by_peer[conn.key]

    def give(self, conn: Slotted) -> None:
        """``conn``, which took a slot, closed (or is closed to make room)."""
        self._unlist(conn)
        self.open -= 1
        key = conn.key
        left = self.by_peer[key] - 1
        if left > 0:
            self.by_peer[key] = left
        else:
            del self.by_peer[key]


class Hold:
    """One request body's bytes held in a :class:`BodyBudget`: ``held`` so far; while
    ``arriving`` (its client still sends it), ``evict`` drops it to make room."""

    __slots__ = ("budget", "key", "held", "evict", "arriving")

    def __init__(self, budget: BodyBudget, key: str, evict: Evict | None = None) -> None:
        self.budget = budget
        self.key = key
        self.held = 0
        self.evict = evict
        self.arriving = False

    def take(self, n: int) -> bool:
        """``n`` more bytes came; False: no room (nothing held: the client is refused)."""
        return self.budget._take(self, n)

    def whole(self) -> None:
        """The body is whole: held until released, never dropped to make room."""
        self.budget._settle(self)

    def release(self) -> None:
        """The body is let go of (answered, or its client gone): its bytes given back."""
        self.budget._release(self)


class BodyBudget:
    """Bytes of request bodies held at once (see the module docstring): ``used`` never
    passes ``limit``, nor one peer's ``by_peer`` its ``per_peer``."""

    def __init__(self, limit: int, per_peer: int | None = None) -> None:
        self.limit = limit
        self.per_peer = limit if per_peer is None else per_peer
        self.used = 0
        self.by_peer: Counter[str] = Counter()
        self._arriving: dict[Hold, None] = {}  # least recent progress first
        self._arriving_by_peer: dict[str, dict[Hold, None]] = {}
        self.evicted = 0  # bodies dropped to make room

    def fits(self, key: str, n: int) -> bool:
        """Whether ``n`` more bytes of peer ``key`` fit with nothing dropped."""
        return self.used + n <= self.limit and self.by_peer[key] + n <= self.per_peer

    def hold(self, key: str, evict: Evict | None = None) -> Hold:
        """A new body of peer ``key``; ``evict``: how to drop it while it arrives (None:
        it comes whole)."""
        return Hold(self, key, evict)

    def _take(self, h: Hold, n: int) -> bool:
        key = h.key
        while self.by_peer[key] + n > self.per_peer:
            if not self._evict(self._arriving_by_peer.get(key), h):
                return False
        while self.used + n > self.limit:
            if not self._evict(self._arriving, h):
                return False
        self.used += n
        self.by_peer[key] += n
        h.held += n
        if h.evict is not None:  # progress: the newest arriving
            if h.arriving:
                self._unlist(h)
            h.arriving = True
            self._arriving[h] = None
            self._arriving_by_peer.setdefault(key, {})[h] = None
        return True

    def _evict(self, pool: dict[Hold, None] | None, taker: Hold) -> bool:
        """Drop the body of ``pool`` that made no progress the longest (not ``taker``'s);
        False: none."""
        for victim in pool or ():
            evict = victim.evict
            if victim is not taker and evict is not None:
                self._release(victim)
                self.evicted += 1
                evict()
                return True
        return False

    def _unlist(self, h: Hold) -> None:
        del self._arriving[h]
        peers = self._arriving_by_peer[h.key]
        del peers[h]
        if not peers:
            del self._arriving_by_peer[h.key]

    def _settle(self, h: Hold) -> None:
        if h.arriving:
            self._unlist(h)
        h.arriving = False
        h.evict = None

    def _release(self, h: Hold) -> None:
        self._settle(h)
        if h.held:
            self.used -= h.held
            left = self.by_peer[h.key] - h.held
            if left > 0:
                self.by_peer[h.key] = left
            else:
                del self.by_peer[h.key]
            h.held = 0
