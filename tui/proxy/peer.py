"""Who is on the other end of a loopback connection: the user owning the peer's socket.

Loopback is no boundary between the users of one machine (a shared GPU box). The proxy's
view of other people's requests (``/infertop/events``, a request's text) is for the user
who runs the proxy, so on Linux the proxy looks the peer's socket up in ``/proc/net/tcp``
(and ``tcp6``): the line whose local address is the peer's address and whose remote
address is ours carries the uid that owns the peer's socket. An ssh tunnel's connections
belong to the user who logged in (sshd forwards as them). Where the table cannot be read
(another OS, a hidden /proc), :func:`socket_owner` says None and the caller decides.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
TABLE_LIMIT = 64 * 1024 * 1024  # a table this large is no machine's we should wait on


def _hex_address(host: str, port: int) -> tuple[str, str] | None:
    """``host:port`` as /proc/net/tcp writes it (IPv4 in tcp; IPv4-mapped IPv6 in tcp6)."""
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv4Address):
        v4 = struct.pack("<I", int.from_bytes(ip.packed, "big")).hex().upper()
        mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
        return f"{v4}:{port:04X}", f"{_v6(mapped)}:{port:04X}"
    return f"{_v6(ip)}:{port:04X}", f"{_v6(ip)}:{port:04X}"


def _v6(ip: ipaddress.IPv6Address) -> str:
    words = struct.unpack("!4I", ip.packed)
    return "".join(struct.pack("<I", w).hex().upper() for w in words)


def socket_owner(peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
    """The uid owning the socket at ``peer`` connected to ``ours``, or None (unknown)."""
    p, o = _hex_address(*peer[:2]), _hex_address(*ours[:2])
    if p is None or o is None:
        return None
    for table, (pk, ok) in zip(TABLES, ((p[0], o[0]), (p[1], o[1]))):
        try:
            with table.open("rb") as f:
                text = f.read(TABLE_LIMIT).decode("ascii", "replace")
        except OSError:
            continue
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) > 7 and fields[1] == pk and fields[2] == ok:
                try:
                    return int(fields[7])
                except ValueError:
                    return None
    return None


def same_user(peer: object, ours: object, uid: int) -> bool | None:
    """Whether ``peer`` belongs to ``uid`` (None: cannot be told here)."""
    if not (isinstance(peer, tuple) and isinstance(ours, tuple)) or len(peer) < 2:
        return None
    if not hasattr(socket, "AF_INET"):
        return None
    owner = socket_owner((str(peer[0]), int(peer[1])), (str(ours[0]), int(ours[1])))
    return None if owner is None else owner == uid
