"""Whose process listens on a loopback port (tui/engines/servers/port_owner.py), from the real
/proc/net/tcp*: a socket of this process (IPv4 on 127.0.0.1 and on 0.0.0.0, IPv6 on ::)
is the user's; the squatter run as ``nobody`` (as root, with setpriv) is another
user's; a closed port has no owner; a system without the tables cannot tell."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import port_squatter
from tui.engines.servers.port_owner import PROC_TCP, PortOwner, listeners, port_owners

pytestmark = pytest.mark.skipif(not PROC_TCP[0].is_file(), reason="no /proc/net/tcp here")


def _listen(family: int, host: str) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((host, 0))
    s.listen()
    return s


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for s in made:
        s.close()


def test_our_own_listeners_are_ours(sockets: list[socket.socket]) -> None:
    v4 = _listen(socket.AF_INET, "127.0.0.1")
    anyv4 = _listen(socket.AF_INET, "0.0.0.0")
    sockets += [v4, anyv4]
    ports = [v4.getsockname()[1], anyv4.getsockname()[1]]
    if socket.has_ipv6:
        try:
            v6 = _listen(socket.AF_INET6, "::")
        except OSError:
            pass
        else:
            sockets.append(v6)
            ports.append(v6.getsockname()[1])
    owners = port_owners(ports)
    for port in ports:
        assert owners[port] == PortOwner(port, True, frozenset({os.getuid()}))
        assert owners[port].is_yours() and owners[port].describe() == "yours"


def test_a_closed_port_and_a_loopback_elsewhere_have_no_owner(
    sockets: list[socket.socket],
) -> None:
    """A port nothing listens on; a listener on 127.0.0.2, which a connect to
    127.0.0.1 never reaches."""
    probe = _listen(socket.AF_INET, "127.0.0.1")
    closed = probe.getsockname()[1]
    probe.close()
    other = _listen(socket.AF_INET, "127.0.0.2")
    sockets.append(other)
    port = other.getsockname()[1]
    owners = port_owners([closed, port])
    assert owners[closed].uids == frozenset() and not owners[closed].is_yours()
    assert owners[port].uids == frozenset()
    assert owners[closed].describe() == "nothing listens there now"


def test_another_users_listener_is_not_ours() -> None:
    prefix = port_squatter.as_nobody()
    if prefix is None:
        pytest.skip("needs root and setpriv to run a server as another user")
    squat = port_squatter.Squat(prefix)
    try:
        owner = port_owners([squat.port])[squat.port]
    finally:
        squat.stop()
    import pwd

    nobody = pwd.getpwnam("nobody").pw_uid
    assert owner.uids == frozenset({nobody}) and not owner.is_yours()
    assert owner.describe() == f"owned by another user (nobody, uid {nobody})"


def test_no_tables_means_unknown(tmp_path: Path) -> None:
    owners = port_owners([11434], tables=(tmp_path / "tcp", tmp_path / "tcp6"))
    assert owners[11434] == PortOwner(11434, known=False)
    assert not owners[11434].is_yours()
    assert owners[11434].describe() == "its owner cannot be told on this system"


def test_listeners_reads_only_listen_sockets_on_reachable_addresses() -> None:
    """The kernel's own format (one header line; hex address:port; state; uid 8th)."""
    lo = "0100007F" if sys.byteorder == "little" else "7F000001"
    table = "\n".join(
        [
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid",
            f"   0: {lo}:2CAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001 0 1",
            f"   1: {lo}:2CAA {lo}:9139 01 00000000:00000000 00:00000000 00000000  1002 0 2",
            "   2: 00000000:2CAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1003 0 3",
            "   3: 0200007F:2CAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1004 0 4",
            "   4: garbage",
        ]
    )
    assert listeners(table, 11434) == {1001, 1003}  # not the connection, not 127.0.0.2
    assert listeners(table, 8080) == set()
