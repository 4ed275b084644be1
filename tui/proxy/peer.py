"""Who is on the other end of a loopback connection: the user owning the peer's socket.

Loopback is no boundary between the users of one machine (a shared GPU box). The proxy's
view of other people's requests (``/infertop/events``, a request's text) is for the user
who runs the proxy, so on Linux the proxy asks the kernel who owns the peer's socket:

- first by netlink (``NETLINK_SOCK_DIAG``, ``SOCK_DIAG_BY_FAMILY`` without a dump: the
  kernel looks up the one TCP socket whose source is the peer's address and whose
  destination is ours, and says its uid) — one request and one answer, tens of
  microseconds, whatever the number of sockets on the machine;
- where netlink is refused (a sandbox), in ``/proc/net/tcp`` (and ``tcp6``), read on a
  worker thread and searched for the one line with that address pair (never parsed
  line by line on the event loop: with 50k sockets that took ~115 ms, holding every
  stream).

An ssh tunnel's connections belong to the user who logged in (sshd forwards as them).
:func:`peer_owner` says None when the owner cannot be established (neither way answers,
or the socket is not found); on Linux the caller then refuses (fails closed). Other
platforms have neither (:data:`HAS_TABLE` is False): there the caller decides.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
TABLE_LIMIT = 64 * 1024 * 1024  # a table this large is no machine's we should wait on
HAS_TABLE = sys.platform.startswith("linux")

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NO_COOKIE = 0xFFFFFFFF
_NLMSG = struct.Struct("=IHHII")  # length, type, flags, seq, pid
_REQ = struct.Struct("=BBBxI")  # family, protocol, ext, (pad), states
_ID = struct.Struct("!HH16s16s")  # sport, dport (network order), src, dst
_TAIL = struct.Struct("=III")  # interface, cookie[2]
_MSG = struct.Struct("=BBBB")  # family, state, timer, retrans
_UID_AT = _NLMSG.size + _MSG.size + 48 + 12  # after the socket id: expires, rqueue, wqueue


class NetlinkRefused(Exception):
    """This process may not ask the kernel by netlink (a sandbox, another OS)."""


def _families(host: str) -> list[tuple[int, bytes]]:
    """The (family, 16-byte address) the peer's socket may have: an IPv4 peer (or an
    IPv4-mapped IPv6 one) has an AF_INET socket, or an AF_INET6 one with the mapped
    address; an IPv6 peer an AF_INET6 one."""
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return []
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address):
        mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
        return [(socket.AF_INET, ip.packed.ljust(16, b"\0")), (socket.AF_INET6, mapped.packed)]
    return [(socket.AF_INET6, ip.packed)]


def netlink_owner(peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
    """The uid owning the TCP socket at ``peer`` connected to ``ours``, by netlink; None:
    no such socket. Raises :class:`NetlinkRefused` when netlink cannot be asked."""
    found = netlink_socket(peer, ours)
    return None if found is None else found[0]


def netlink_socket(peer: tuple[str, int], ours: tuple[str, int]) -> tuple[int, int] | None:
    """(uid, inode) of the TCP socket at ``peer`` connected to ``ours``, by netlink (see
    :func:`netlink_owner`)."""
    pairs = list(zip(_families(peer[0]), _families(ours[0])))
    if not pairs:
        return None
    try:
        nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)  # type: ignore[attr-defined,unused-ignore]
    except (OSError, AttributeError) as e:
        raise NetlinkRefused(str(e)) from None
    with nl:
        nl.settimeout(1.0)  # the kernel answers within the send; this only bounds a bug
        for seq, ((family, src), (_f, dst)) in enumerate(pairs, 1):
            body = (
                _REQ.pack(family, socket.IPPROTO_TCP, 0, 0xFFFFFFFF)
                + _ID.pack(peer[1], ours[1], src, dst)
                + _TAIL.pack(0, NO_COOKIE, NO_COOKIE)
            )
            head = _NLMSG.pack(_NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0)
            try:
                nl.sendto(head + body, (0, 0))
                answer = nl.recv(8192)
            except OSError as e:
                raise NetlinkRefused(str(e)) from None
            if len(answer) < _NLMSG.size:
                raise NetlinkRefused("a short netlink answer")
            _n, kind, _flags, got_seq, _pid = _NLMSG.unpack_from(answer)
            if got_seq != seq:
                raise NetlinkRefused("a netlink answer to another request")
            if kind == NLMSG_ERROR:
                (code,) = struct.unpack_from("=i", answer, _NLMSG.size)
                if -code == errno.ENOENT:
                    continue  # not in this family: the next
                raise NetlinkRefused(f"netlink: {errno.errorcode.get(-code, code)}")
            if kind != SOCK_DIAG_BY_FAMILY or len(answer) < _UID_AT + 8:
                raise NetlinkRefused(f"an unexpected netlink answer (type {kind})")
            uid, inode = struct.unpack_from("=II", answer, _UID_AT)
            return int(uid), int(inode)
    return None


def _hex_address(host: str, port: int) -> tuple[str, str] | None:
    """``host:port`` as /proc/net/tcp writes it (IPv4 in tcp; IPv4-mapped IPv6 in tcp6)."""
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address):
        v4 = struct.pack("<I", int.from_bytes(ip.packed, "big")).hex().upper()
        mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
        return f"{v4}:{port:04X}", f"{_v6(mapped)}:{port:04X}"
    return f"{_v6(ip)}:{port:04X}", f"{_v6(ip)}:{port:04X}"


def _v6(ip: ipaddress.IPv6Address) -> str:
    words = struct.unpack("!4I", ip.packed)
    return "".join(struct.pack("<I", w).hex().upper() for w in words)


def table_owner(peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
    """The same, from ``/proc/net/tcp`` and ``tcp6`` (None: not found, or no table).
    Blocking (the kernel writes the whole table for the read): run it on a thread. The
    one line is found by searching for its address pair, not by parsing every line."""
    found = table_socket(peer, ours)
    return None if found is None else found[0]


def table_socket(peer: tuple[str, int], ours: tuple[str, int]) -> tuple[int, int] | None:
    """(uid, inode) of that socket from ``/proc/net/tcp`` and ``tcp6`` (blocking: see
    :func:`table_owner`)."""
    p, o = _hex_address(*peer[:2]), _hex_address(*ours[:2])
    if p is None or o is None:
        return None
    for table, (pk, ok) in zip(TABLES, ((p[0], o[0]), (p[1], o[1]))):
        try:
            with table.open("rb") as f:
                text = f.read(TABLE_LIMIT)
        except OSError:
            continue
        at = text.find(f": {pk} {ok} ".encode())
        if at < 0:
            continue
        end = text.find(b"\n", at)
        fields = text[at : end if end >= 0 else len(text)].split()
        try:  # ":", local, remote, st, queues, tr:when, retrnsmt, uid, timeout, inode
            return int(fields[7]), int(fields[9])
        except (IndexError, ValueError):
            return None
    return None


async def peer_owner(peer: object, ours: object) -> int | None:
    """The uid owning the peer's socket of a TCP connection (``peer`` and ``ours`` as
    the socket names them), or None when it cannot be established (see the module
    docstring). Netlink first, on the loop (one syscall pair); the table on a thread."""
    if not (isinstance(peer, tuple) and isinstance(ours, tuple)) or len(peer) < 2:
        return None
    if len(ours) < 2 or not HAS_TABLE:
        return None
    p, o = (str(peer[0]), int(peer[1])), (str(ours[0]), int(ours[1]))
    try:
        return netlink_owner(p, o)
    except NetlinkRefused:
        pass
    return await asyncio.to_thread(table_owner, p, o)


def owner_now(peer: object, ours: object) -> int | None:
    """The uid owning the peer's socket, asked by netlink now (one syscall pair, on the
    caller's thread); None when it cannot be asked so (netlink refused, another OS) or
    is not found. For counting a loopback client as its user (tui/proxy/limits.py),
    where the slower table cannot be waited for."""
    if not (isinstance(peer, tuple) and isinstance(ours, tuple)) or len(peer) < 2:
        return None
    if len(ours) < 2 or not HAS_TABLE:
        return None
    try:
        return netlink_owner((str(peer[0]), int(peer[1])), (str(ours[0]), int(ours[1])))
    except NetlinkRefused:
        return None


async def is_proxy_user(peer: object, ours: object) -> bool:
    """Whether the peer's socket belongs to the user who runs the proxy: on Linux asked
    of the kernel (:func:`peer_owner`), False when it cannot be established (fail
    closed); on a platform with no socket table to ask, True (docs/proxy.md)."""
    if not HAS_TABLE:
        return True
    owner = await peer_owner(peer, ours)
    return owner is not None and owner == os.getuid()


def format_peer(peer: Any) -> str:
    """A socket's address as a client's label: ``host:port`` (``[v6]:port``)."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer or "?")


def is_loopback(peer: Any) -> bool:
    """Whether a socket's address is on loopback (an IPv4-mapped one unmapped)."""
    try:
        addr = ipaddress.ip_address(str(peer[0]).partition("%")[0])
    except (ValueError, TypeError, IndexError):
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback
