"""What one client may hold of the proxy, and who may read the owner's routes (issue 43):
the body budget, the per-address cap on connections, the loopback Host and no Origin on
the owner's routes, and the peer-owner check failing closed, off the event loop."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from tests.proxy.proxy_support import raw_exchange, read_response, wait_until
from tests.support.scripted_upstream import ScriptedUpstream
from tui.proxy import peer
from tui.proxy.limits import BodyBudget, ClientSlots, address_key
from tui.proxy.own_routes import loopback_host

OK = [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")]


@pytest.fixture
def up():  # type: ignore[no-untyped-def]
    server = ScriptedUpstream(lambda _req: OK)
    try:
        yield server
    finally:
        server.stop()


def _connect(url: str, source: str = "127.0.0.1") -> socket.socket:
    host, port = url[7:].split(":")
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def _post(length: int, body: bytes = b"") -> bytes:
    return b"POST /v1/embeddings HTTP/1.1\r\nHost: p\r\nContent-Length: %d\r\n\r\n%s" % (
        length,
        body,
    )


def test_request_bodies_held_at_once_stay_within_the_budget(start_proxy, up) -> None:
    """Bodies still coming hold their whole length from their head; one that would take
    the bodies held at once past the budget is refused (503) and closed; a body is let
    go of when its client goes away, or once the upstream answered it."""
    proxy = start_proxy(up.url, max_body=1000, body_budget=2500)
    used = lambda: proxy.call(lambda: proxy.proxy.budget.used)  # noqa: E731
    holders = [_connect(proxy.url) for _ in range(2)]
    for s in holders:
        s.sendall(_post(1000, b"x" * 900))  # most of a body, then nothing
    wait_until(lambda: used() == 2000)
    got = raw_exchange(proxy.url, _post(1000))
    assert got.startswith(b"HTTP/1.1 503 ") and b"--body-budget-mb" in got
    # a chunked body holds what came so far: 400 fits, the next 200 does not
    with _connect(proxy.url) as s:
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\n\r\n")
        s.sendall(b"190\r\n" + b"y" * 400 + b"\r\n")
        wait_until(lambda: used() == 2400)
        s.sendall(b"c8\r\n" + b"y" * 200 + b"\r\n")
        head, _ = read_response(s)
        assert head.startswith(b"HTTP/1.1 503 ")
    wait_until(lambda: used() == 2000)
    holders[0].close()  # gone: its hold let go of
    wait_until(lambda: used() == 1000)
    with _connect(proxy.url) as s:  # a whole body goes through, then is let go of
        s.sendall(_post(1000, b"z" * 1000))
        assert read_response(s)[1] == b"ok"
        wait_until(lambda: used() == 1000)
        assert up.requests[-1].endswith(b"z" * 1000)
    holders[1].close()
    wait_until(lambda: used() == 0)


def test_one_address_cannot_take_every_connection(start_proxy, up) -> None:
    """--max-clients 4: one address holds at most half of them (silent sockets too), so
    a client from another address is still served."""
    try:
        socket.create_server(("127.0.0.2", 0)).close()
    except OSError:
        pytest.skip("no second loopback address here (Linux routes all of 127/8)")
    proxy = start_proxy(up.url, max_clients=4)
    silent = [_connect(proxy.url) for _ in range(2)]
    try:
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.connections)) == 2)
        for _ in range(2):
            with _connect(proxy.url) as s:
                got = s.recv(4096)
                assert got.startswith(b"HTTP/1.1 503 ") and b"from your address" in got
        with _connect(proxy.url, source="127.0.0.2") as s:
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
            assert read_response(s)[1] == b"ok"
            assert proxy.call(lambda: dict(proxy.proxy.slots.by_address)) == {
                "127.0.0.1": 2,
                "127.0.0.2": 1,
            }
    finally:
        for s in silent:
            s.close()
    wait_until(lambda: proxy.call(lambda: proxy.proxy.slots.open) == 0)
    assert proxy.call(lambda: dict(proxy.proxy.slots.by_address)) == {}


def test_client_slots_and_the_budget_count_exactly() -> None:
    slots = ClientSlots(total=3, per_address=2)
    assert slots.take("a") is None and slots.take("a") is None
    assert "your address" in (slots.take("a") or "")
    assert slots.take("b") is None and slots.take("c") == "too many clients"
    slots.give("a")
    assert slots.take("c") is None and slots.open == 3
    budget = BodyBudget(10)
    assert budget.take(6) and not budget.take(5) and budget.used == 6
    budget.give(6)
    assert budget.take(10) and budget.used == 10


@pytest.mark.parametrize(
    "peer_address, key",
    [
        (("127.0.0.1", 5), "127.0.0.1"),
        (("::ffff:10.1.2.3", 5, 0, 0), "10.1.2.3"),
        (("2001:db8:1:2:aaaa::1", 5, 0, 0), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:bbbb::9", 5, 0, 0), "2001:db8:1:2::/64"),
        (("fe80::1%eth0", 5, 0, 2), "fe80::/64"),
    ],
)
def test_a_client_address_is_an_ipv4_address_or_an_ipv6_64(peer_address, key: str) -> None:
    assert address_key(peer_address) == key


@pytest.mark.parametrize(
    "host, ok",
    [
        (b"127.0.0.1:8800", True),
        (b"127.0.0.1", True),
        (b"127.9.9.9:1", True),
        (b"localhost:8800", True),
        (b"LocalHost.", True),
        (b"[::1]:8800", True),
        (b"[::ffff:127.0.0.1]", True),
        (b"evil.example:8800", False),
        (b"127.0.0.1.evil.example", False),
        (b"localhost.evil.example", False),
        (b"::1", False),
        (b"10.0.0.1:8800", False),
        (b"127.0.0.1:8800, evil", False),
        (b"", False),
        (None, False),
    ],
)
def test_a_loopback_host(host: bytes | None, ok: bool) -> None:
    assert loopback_host(host) is ok


def _get(url: str, path: str, *fields: bytes) -> bytes:
    extra = b"".join(f + b"\r\n" for f in fields)
    request = b"GET %s HTTP/1.1\r\nConnection: close\r\n%s\r\n" % (path.encode(), extra)
    return raw_exchange(url, request)


def test_the_owner_routes_answer_no_web_page(start_proxy, up) -> None:
    """DNS rebinding: a page the user opens, its name rebound to 127.0.0.1, connects as
    the user (the owner check passes) but sends its own name as Host; a page's request
    across origins carries an Origin. Both are refused on the owner's routes; metrics
    and forwarding are not the owner's and stay as they were."""
    proxy = start_proxy(up.url)
    port = proxy.url.rsplit(":", 1)[1].encode()
    own = b"Host: 127.0.0.1:" + port
    for path in ("/infertop/requests/nope", "/infertop/events"):
        for fields in (
            (b"Host: evil.example:" + port,),
            (b"Host: 127.0.0.1.evil.example:" + port,),
            (),  # no Host at all
            (own, b"Origin: http://evil.example:" + port),
            (own, b"Origin: null"),
        ):
            got = _get(proxy.url, path, *fields)
            assert got.startswith(b"HTTP/1.1 403 "), (path, fields, got[:200])
    assert _get(proxy.url, "/infertop/requests/nope", own).startswith(b"HTTP/1.1 404 ")
    host = b"Host: localhost:" + port
    assert _get(proxy.url, "/infertop/requests/nope", host).startswith(b"HTTP/1.1 404 ")
    evil = b"Host: evil.example:" + port
    assert _get(proxy.url, "/infertop/metrics", evil).startswith(b"HTTP/1.1 200 ")
    assert _get(proxy.url, "/v1/models", evil, b"Origin: http://x").endswith(b"ok")


@pytest.mark.skipif(not peer.HAS_TABLE, reason="Linux only (no socket table elsewhere)")
def test_the_owner_routes_fail_closed_when_the_owner_cannot_be_told(
    start_proxy, up, monkeypatch, tmp_path
) -> None:
    """Neither netlink nor /proc/net/tcp answers: the owner cannot be established, so
    the owner's routes are refused (they were answered to any loopback client)."""

    def refused(*_a: object) -> int:
        raise peer.NetlinkRefused("not here")

    monkeypatch.setattr(peer, "netlink_owner", refused)
    monkeypatch.setattr(peer, "TABLES", (tmp_path / "tcp", tmp_path / "tcp6"))
    proxy = start_proxy(up.url)
    got = _get(proxy.url, "/infertop/requests/nope", b"Host: 127.0.0.1")
    assert got.startswith(b"HTTP/1.1 403 ") and b"the proxy's own user" in got


@pytest.mark.skipif(not peer.HAS_TABLE, reason="Linux only (no socket table elsewhere)")
def test_the_table_is_read_off_the_event_loop(start_proxy, up, monkeypatch) -> None:
    """Where netlink is refused, /proc/net/tcp is read on a worker thread, never on the
    proxy's loop (with 50k sockets one read took ~115 ms, holding every stream)."""
    threads: list[str] = []
    table_owner = peer.table_owner

    def refused(*_a: object) -> int:
        raise peer.NetlinkRefused("not here")

    def on_a_thread(*a):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return table_owner(*a)

    monkeypatch.setattr(peer, "netlink_owner", refused)
    monkeypatch.setattr(peer, "table_owner", on_a_thread)
    proxy = start_proxy(up.url)
    got = _get(proxy.url, "/infertop/requests/nope", b"Host: 127.0.0.1")
    assert got.startswith(b"HTTP/1.1 404 ")  # found: the proxy's own user
    assert len(threads) == 1 and threads[0] != "infertop-proxy"


@pytest.mark.skipif(not peer.HAS_TABLE, reason="Linux only")
def test_the_peer_socket_owner_is_found_by_netlink_and_in_the_table() -> None:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            srv = socket.create_server((host, 0), family=family)
        except OSError:
            continue
        ours = srv.getsockname()[:2]
        with srv, socket.create_connection(ours):
            conn, them = srv.accept()
            with conn:
                try:
                    assert peer.netlink_owner(them[:2], ours) == os.getuid()
                except peer.NetlinkRefused:
                    pass  # (a sandbox without netlink: the table below is the way)
                assert peer.table_owner(them[:2], ours) == os.getuid()
                assert peer.table_owner((host, 1), ours) is None
                try:
                    assert peer.netlink_owner((host, 1), ours) is None
                except peer.NetlinkRefused:
                    pass
