"""The local process owning a client's socket ("name[pid]"), found off the request's path.

For a client on this host (a loopback peer) the kernel knows the socket's owner and inode
(:func:`tui.proxy.peer.netlink_socket`, else the ``/proc/net/tcp`` table); the process
is the one with a descriptor ``socket:[inode]`` under ``/proc/PID/fd``. Looking takes a
walk of ``/proc`` — milliseconds to tens of them — so it runs on one thread of its own
(:class:`ProcessFinder`), once per client connection, started by its first generation
request; the request never waits for it. Bounded: only the processes of the socket's
owner are searched, at most :data:`MAX_FDS` descriptors and :data:`MAX_SECONDS` per
lookup, at most :data:`MAX_PENDING` lookups waiting (past that a connection's is not
made). A socket of another user's process (its descriptors are not ours to read) gives
``uid N``; one not found gives nothing. Linux only (elsewhere: nothing).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from pathlib import Path
from typing import Final

from tui.proxy.peer import HAS_TABLE, NetlinkRefused, netlink_socket, table_socket

PROC = Path("/proc")
MAX_FDS: Final = 200_000
MAX_SECONDS: Final = 0.5
MAX_PENDING: Final = 64
COMM_BYTES: Final = 64


class LookupState(Enum):
    """Where the lookup of a client's process is."""

    UNASKED = "unasked"
    PENDING = "pending"  # on the finder's thread
    DONE = "done"  # ``name`` is what it found (None: nothing)


class PeerProcess:
    """One connection's answer: ``name`` ("comm[pid]", "uid N", or None) once
    ``state`` is "done". Written by the finder's thread, read on the proxy's loop (one
    attribute store: no lock needed)."""

    __slots__ = ("name", "state")

    def __init__(self) -> None:
        self.name: str | None = None
        self.state = LookupState.UNASKED


def socket_of(peer: tuple[str, int], ours: tuple[str, int]) -> tuple[int, int] | None:
    """(uid, inode) of the peer's socket: netlink, else the table (blocking)."""
    try:
        return netlink_socket(peer, ours)
    except NetlinkRefused:
        return table_socket(peer, ours)


def process_with_socket(uid: int, inode: int, proc: Path = PROC) -> str | None:
    """ "comm[pid]" of the process of ``uid`` holding the socket ``inode``; "uid N" when
    that user's descriptors cannot be read; None: not found within the bounds."""
    want = f"socket:[{inode}]"
    deadline = time.monotonic() + MAX_SECONDS
    looked = 0
    readable = False
    try:
        entries = os.scandir(proc)
    except OSError:
        return None
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                fds = os.listdir(f"{entry.path}/fd")
            except OSError:
                continue
            readable = True
            for fd in fds:
                looked += 1
                if looked > MAX_FDS or time.monotonic() > deadline:
                    return None
                try:
                    if os.readlink(f"{entry.path}/fd/{fd}") == want:
                        return f"{_comm(entry.path)}[{entry.name}]"
                except OSError:
                    continue
    return None if readable or uid == os.getuid() else f"uid {uid}"


def _comm(path: str) -> str:
    try:
        with open(f"{path}/comm", "rb") as f:
            raw = f.read(COMM_BYTES)
    except OSError:
        return "?"
    return raw.decode("utf-8", "replace").strip() or "?"


def lookup(peer: object, ours: object) -> str | None:
    """The process owning the peer's socket of a loopback connection (see the module
    docstring); blocking."""
    if not (isinstance(peer, tuple) and isinstance(ours, tuple)):
        return None
    if len(peer) < 2 or len(ours) < 2 or not HAS_TABLE:
        return None
    found = socket_of((str(peer[0]), int(peer[1])), (str(ours[0]), int(ours[1])))
    if found is None:
        return None
    uid, inode = found
    return process_with_socket(uid, inode)


class ProcessFinder:
    """Lookups on one thread of their own, at most :data:`MAX_PENDING` waiting."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.pending = 0
        self.skipped = 0

    def find(self, box: PeerProcess, peer: object, ours: object) -> None:
        """Start looking for ``box``'s process (once; never blocks)."""
        if box.state is not LookupState.UNASKED:
            return
        box.state = LookupState.PENDING
        with self._lock:
            full = self.pending >= MAX_PENDING
            if not full:
                self.pending += 1
        if full:
            box.state = LookupState.DONE
            self.skipped += 1
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="infertop-peer-process")

        def run() -> None:
            try:
                box.name = lookup(peer, ours)
            except Exception:  # noqa: BLE001 - a name is not worth a traceback
                box.name = None
            finally:
                box.state = LookupState.DONE
                with self._lock:
                    self.pending -= 1

        self._pool.submit(run)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
