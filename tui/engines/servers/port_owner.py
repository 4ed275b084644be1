"""Whose process listens on a loopback port: the user's own, or another local user's.

Any local user can listen on a free port above 1023, so a server discovery finds on
``127.0.0.1:PORT`` is whoever got there first. Linux says who that is: each line of
``/proc/net/tcp`` and ``/proc/net/tcp6`` is one socket of this network namespace, with
its local address, state and owner's uid. The listeners a connect to ``127.0.0.1:PORT``
can reach are those in state LISTEN bound to 127.0.0.1, to 0.0.0.0, or (IPv4 mapped into
a dual-stack IPv6 socket) to ``::`` or ``::ffff:127.0.0.1``. Elsewhere (macOS, Windows)
nothing says, and the owner is unknown.

The files are read within MAX_PROC_BYTES each (a host with very many sockets: the owner
is then unknown, not guessed).
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

PROC_TCP = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
MAX_PROC_BYTES = 32 << 20  # ~200,000 sockets
_LISTEN = "0A"  # TCP_LISTEN as the kernel prints it


def _proc_hex(packed: bytes) -> str:
    """An address as /proc/net/tcp* prints it: each 32-bit word in host byte order, hex."""
    words = (packed[i : i + 4] for i in range(0, len(packed), 4))
    return "".join(f"{int.from_bytes(w, sys.byteorder):08X}" for w in words)


# the local addresses of sockets that accept a connection to 127.0.0.1
_REACHABLE = frozenset(
    {
        _proc_hex(socket.inet_aton("127.0.0.1")),
        _proc_hex(socket.inet_aton("0.0.0.0")),
        _proc_hex(bytes(16)),  # ::
        _proc_hex(bytes(10) + b"\xff\xff" + socket.inet_aton("127.0.0.1")),
    }
)


@dataclass(frozen=True)
class PortOwner:
    """Who listens on a loopback port. ``known``: this system says (Linux); ``uids``:
    the owners of the listening sockets a connect to 127.0.0.1 reaches (empty when none
    listens any more)."""

    port: int
    known: bool
    uids: frozenset[int] = frozenset()

    def is_yours(self, uid: int | None = None) -> bool:
        """Every listener there belongs to ``uid`` (default: this process's user) or to
        root (who can read that user's files anyway); False when unknown or none."""
        if not self.known or not self.uids:  # (and no os.getuid where nothing says)
            return False
        return self.uids <= {os.getuid() if uid is None else uid, 0}

    def describe(self) -> str:
        """In words, for a notification: "you", "uid 1001", "unknown"."""
        if not self.known:
            return "its owner cannot be told on this system"
        if not self.uids:
            return "nothing listens there now"
        if self.is_yours():
            return "yours"
        others = sorted(self.uids - {os.getuid(), 0})
        names = ", ".join(_user_name(u) for u in others)
        return f"owned by another user ({names})"


def _user_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except (ImportError, KeyError):
        return f"uid {uid}"


def listeners(text: str, port: int) -> set[int]:
    """The uids of LISTEN sockets in one /proc/net/tcp* table (``text``) that a connect
    to 127.0.0.1:``port`` reaches."""
    want = f":{port:04X}"
    uids = set()
    for line in text.splitlines()[1:]:
        f = line.split()
        # sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
        if len(f) < 8 or f[3] != _LISTEN or not f[1].endswith(want):
            continue
        if f[1][: -len(want)] in _REACHABLE and f[7].isdigit():
            uids.add(int(f[7]))
    return uids


def port_owners(ports: list[int], tables: tuple[Path, ...] = PROC_TCP) -> dict[int, PortOwner]:
    """Who listens on 127.0.0.1 at each of ``ports`` now (see the module docstring); the
    tables are read once."""
    unknown = {port: PortOwner(port, known=False) for port in ports}
    if not tables[0].is_file():
        return unknown
    texts = []
    for path in tables:
        try:
            with path.open("rb") as f:
                data = f.read(MAX_PROC_BYTES + 1)
        except FileNotFoundError:  # no IPv6
            continue
        except OSError:
            return unknown
        if len(data) > MAX_PROC_BYTES:
            return unknown
        texts.append(data.decode("ascii", "replace"))
    return {
        port: PortOwner(port, True, frozenset(set().union(*(listeners(t, port) for t in texts))))
        for port in ports
    }
