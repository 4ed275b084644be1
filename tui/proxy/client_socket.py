"""One client's socket as the rest of the proxy sees it: who is on the other end, what it
holds of the proxy's limits, and the writing of its answers. Reading its requests is
:class:`~tui.proxy.client_conn.ClientConnection`'s (a subclass).

Who: its address, a loopback peer's owning user (:mod:`tui.proxy.peer`, asked when it
connects) and process (:mod:`tui.proxy.peer_process`, looked up once), and whether it may
see other people's requests (:meth:`ClientSocket.may_watch`). What it holds: one of the
proxy's connection slots (:class:`~tui.proxy.limits.ClientSlots`, per peer too — a
loopback client's user, another's address —: refused with a 503 when none is left, and,
idle between requests, closed to make room for another) and the deadline of the read in
progress, checked by the proxy's sweep. Writing: its unsent answer bytes are bounded —
past :data:`HIGH_WATER` the upstream socket feeding it stops being read (TCP then slows
that one upstream stream; nobody else's), and a client that reads nothing for
``client_stall`` seconds is dropped (its upstream request cancelled); a watcher too far
behind is dropped too.

A connection knows of the proxy only the parts it uses (:class:`ClientParts`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from tui.proxy.book import WATCHER_BUFFER
from tui.proxy.exchange import Exchange, Forwarding
from tui.proxy.limits import ClientSlots, Hold, peer_key
from tui.proxy.peer import format_peer, is_loopback, is_proxy_user, owner_now
from tui.proxy.peer_process import LookupState, PeerProcess
from tui.proxy.upstream import UpstreamConn
from tui.proxy.wire import error_response

HIGH_WATER = 1024 * 1024
LOW_WATER = 256 * 1024


@dataclass(frozen=True)
class ClientParts:
    """What a client connection uses of the proxy (seconds, bytes): its limits, the
    slots and the set of open connections it joins, the exchanges' parts (the upstream,
    the book, the body budget), and where an internal error is said."""

    client_timeout: float  # a request's head and body, from its first byte
    idle_timeout: float  # a kept-alive connection, between requests
    client_stall: float  # a client that reads nothing of its answer this long
    max_body: int  # one request's body
    slots: ClientSlots
    connections: set[ClientSocket]  # the open ones (the sweep checks their deadlines)
    forwarding: Forwarding
    note: Callable[[str], None]


class ClientSocket(asyncio.Protocol):
    """One client's socket (see the module docstring); what it reads is its subclass's."""

    def __init__(self, parts: ClientParts) -> None:
        self.parts = parts
        self.fw = parts.forwarding
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.loopback = False
        self.closed = False
        self.paused = False  # our unsent bytes passed HIGH_WATER
        self.upstream: UpstreamConn | None = None
        self.task: asyncio.Task[None] | None = None  # the request's: forward, or own route
        self.exchange: Exchange | None = None  # the request forwarded now, if one is
        self.deadline = 0.0  # loop.time() past which the read in progress times out (0: none)
        self.stall_timer: asyncio.TimerHandle | None = None
        self.dropped_for: str | None = None  # why the proxy dropped this client
        self.addresses: tuple[Any, Any] = (None, None)  # (peer, ours), as the socket says
        self.watch_ok: bool | None = None  # may_watch(), once asked
        self.owner: int | None = None  # the uid owning a loopback peer's socket, if known
        self.key = ""  # the peer it counts as (tui/proxy/limits.py: a user, an address)
        self.slotted = False  # it holds a slot (parts.slots)
        self.idle = False  # between requests: closed first to make room (parts.slots)
        self.hold: Hold | None = None  # the body being read, in the body budget
        self.process = PeerProcess()  # the local process owning the client's socket

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's is no subclass)
        t = self.transport
        peer = t.get_extra_info("peername")
        self.peer, self.loopback = format_peer(peer), is_loopback(peer)
        self.addresses = (peer, t.get_extra_info("sockname"))
        t.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)
        if self.loopback:  # (any local user can connect from 127.0.0.2, .3, ...)
            self.owner = owner_now(*self.addresses)
        self.key = peer_key(peer, self.owner)
        why = self.parts.slots.take(self)
        if why is not None:
            self.closed = True
            t.write(error_response(503, "Service Unavailable", why, True))
            t.close()
            return
        self.slotted = self.idle = True
        self.parts.connections.add(self)
        self._arm(self.parts.idle_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        if self.stall_timer is not None:
            self.stall_timer.cancel()
        self.parts.connections.discard(self)
        if self.slotted:
            self.slotted = False
            self.parts.slots.give(self)
        if self.hold is not None:
            self.hold.release()
            self.hold = None
        if self.exchange is not None:  # (ended here if its task has not run)
            self.exchange.cancel()
        if self.task is not None:
            self.task.cancel()

    def pause_writing(self) -> None:
        self.paused = True
        if self.upstream is not None:
            self.upstream.pause_reading()
        loop = asyncio.get_running_loop()
        self.stall_timer = loop.call_later(self.parts.client_stall, self._too_slow)

    def resume_writing(self) -> None:
        self.paused = False
        if self.stall_timer is not None:
            self.stall_timer.cancel()
            self.stall_timer = None
        if self.upstream is not None:
            self.upstream.resume_reading()

    def _too_slow(self) -> None:
        self.stall_timer = None
        self.dropped_for = f"the client read nothing for {self.parts.client_stall:g} s"
        if self.transport is not None:
            self.transport.abort()

    def evict(self) -> None:
        """Closed to make room for another client: this connection was idle between
        requests the longest (tui/proxy/limits.py; its slot is given already)."""
        self.slotted = self.idle = False
        self.dropped_for = "idle between requests: closed to make room for another client"
        self.close()

    # -- what forward and own_routes use ---------------------------------------------------
    async def may_watch(self) -> bool:
        """Whether this client may see other people's requests: a loopback client of the
        user who runs the proxy. On Linux the peer socket's owner (tui/proxy/peer.py; the
        one found when it connected, else asked now), refused when it cannot be
        established; on a platform with no socket table to ask, any loopback client
        (docs/proxy.md)."""
        if not self.loopback:
            return False
        if self.watch_ok is None:
            if self.owner is not None:
                self.watch_ok = self.owner == os.getuid()
            else:
                self.watch_ok = await is_proxy_user(*self.addresses)
        return self.watch_ok

    def peer_process(self) -> PeerProcess:
        """The local process owning the client's socket: looked up once, for a loopback
        client when the proxy takes identities (tui/proxy/peer_process.py), on the
        finder's thread; read when the request ends."""
        finder = self.fw.finder
        if finder is not None and self.loopback and self.process.state is LookupState.UNASKED:
            finder.find(self.process, *self.addresses)
        return self.process

    def write(self, data: bytes) -> None:
        t = self.transport
        if t is not None and not self.closed and not t.is_closing():
            t.write(data)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def send(self, line: bytes) -> bool:
        """A watcher's next line (chunk-framed); False once gone or too far behind."""
        t = self.transport
        if t is None or self.closed or t.is_closing():
            return False
        if t.get_write_buffer_size() > WATCHER_BUFFER:
            self.dropped_for = "a watcher too far behind"
            t.close()
            return False
        t.write(b"%x\r\n%s\r\n" % (len(line), line))
        return True

    # -- the read in progress' deadline --------------------------------------------------
    def _arm(self, seconds: float) -> None:
        """A deadline for the read in progress, checked by the proxy's sweep (one timer
        for every connection, not one per request: a timer costs more than a request's
        head takes to parse)."""
        self.deadline = asyncio.get_running_loop().time() + seconds

    def _disarm(self) -> None:
        self.deadline = 0.0

    def check_deadline(self, now: float) -> None:
        """The sweep's call (about every :data:`~tui.proxy.server.SWEEP_S`)."""
        if self.deadline and now >= self.deadline:
            self.deadline = 0.0
            self._timed_out()

    def _timed_out(self) -> None:
        """Past its deadline with no request in flight: closed (the subclass says 408
        first when a request had begun)."""
        if self.task is not None or self.closed:
            return
        self.close()

    def _refuse(self, status: int, reason: str, why: str) -> None:
        """Refused: an error answer, the connection closed after it, the bytes of the body
        being read given back to the budget."""
        self.write(error_response(status, reason, why, close=True))
        self.close()
        self.closed = True
        if self.hold is not None:
            self.hold.release()
            self.hold = None
