"""What one client may hold of the proxy, and who may read the owner's routes (issue 43):
the body budget, the per-address cap on connections, the loopback Host and no Origin on
the owner's routes, and the peer-owner check failing closed, off the event loop."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from tests.proxy.proxy_support import raw_exchange, read_response, wait_until
from tests.support.scripted_upstream import ScriptedUpstream
from tui.proxy import peer
from tui.proxy.limits import BodyBudget, address_key
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


def _used(proxy):  # type: ignore[no-untyped-def]
    return proxy.call(lambda: proxy.proxy.budget.used)


def test_a_body_holds_the_bytes_that_came_not_its_declared_length(start_proxy, up) -> None:
    """A head declaring a body holds nothing of the budget; each byte is held as it
    comes (a chunked body's too), until the upstream has answered it or its client
    went away (issue 48: the budget was charged the whole Content-Length on the head)."""
    proxy = start_proxy(up.url, max_body=1000, body_budget=2500)
    with _connect(proxy.url) as s:
        s.sendall(_post(1000))
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.connections)) == 1)
        time.sleep(0.05)
        assert _used(proxy) == 0
        s.sendall(b"x" * 300)
        wait_until(lambda: _used(proxy) == 300)
        s.sendall(b"x" * 700)
        assert read_response(s)[1] == b"ok"
        wait_until(lambda: _used(proxy) == 0)  # answered: let go of
        assert up.requests[-1].endswith(b"x" * 1000)
    with _connect(proxy.url) as s:
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\n\r\n")
        s.sendall(b"190\r\n" + b"y" * 400 + b"\r\n")
        wait_until(lambda: _used(proxy) == 400)
    wait_until(lambda: _used(proxy) == 0)  # its client went away


def test_a_full_budget_drops_the_body_stalled_longest(start_proxy, up) -> None:
    """Bodies arriving fill the budget: the next bytes to come make room by dropping the
    body that made no progress the longest (its client gets 503), not by refusing the
    newcomer; a body already whole is never dropped."""
    proxy = start_proxy(up.url, max_body=1000, body_budget=2500, body_per_peer=2500)
    stalled = [_connect(proxy.url) for _ in range(2)]
    for i, s in enumerate(stalled):
        s.sendall(_post(1000, b"x" * 900))  # most of a body, then nothing
        wait_until(lambda i=i: _used(proxy) == 900 * (i + 1))
    with _connect(proxy.url) as s:  # 1000 more bytes do not fit: the oldest makes room
        s.sendall(_post(1000, b"z" * 1000))
        assert read_response(s)[1] == b"ok"
    head, body = read_response(stalled[0])
    assert head.startswith(b"HTTP/1.1 503 ") and b"no progress the longest" in body
    assert stalled[0].recv(100) == b""  # and closed
    wait_until(lambda: _used(proxy) == 900)
    assert proxy.call(lambda: proxy.proxy.budget.evicted) == 1
    stalled[1].sendall(b"x" * 100)  # the other one was only slow: it goes on
    assert read_response(stalled[1])[1] == b"ok"
    wait_until(lambda: _used(proxy) == 0)
    for s in stalled:
        s.close()


def test_one_peer_holds_at_most_its_share_of_the_budget() -> None:
    """Per peer (a loopback client's user, another's address): its bodies arriving make
    room among themselves once its share is full; another peer's are left alone; with
    nothing arriving to drop, a body is refused."""
    budget = BodyBudget(limit=10, per_peer=6)
    dropped: list[str] = []
    a1 = budget.hold("uid 1", lambda: dropped.append("a1"))
    a2 = budget.hold("uid 1", lambda: dropped.append("a2"))
    b1 = budget.hold("uid 2", lambda: dropped.append("b1"))
    assert a1.take(4) and b1.take(4) and a2.take(2)
    assert budget.used == 10 and dropped == []  # uid 1's share (6) and the total, full
    assert a2.take(1) and dropped == ["a1"]  # uid 1's own stalled body made room
    assert budget.by_peer == {"uid 1": 3, "uid 2": 4} and budget.used == 7
    c = budget.hold("10.0.0.9", lambda: dropped.append("c"))
    assert c.take(3) and budget.used == 10
    assert b1.take(1) and dropped == ["a1", "a2"]  # the total full: the longest stalled
    a2.release()  # (given back already: nothing twice)
    assert budget.used == 8 and budget.by_peer == {"uid 2": 5, "10.0.0.9": 3}
    b1.whole()
    c.whole()  # whole: nothing may be dropped, so the next body is refused
    d = budget.hold("10.0.0.7", lambda: dropped.append("d"))
    assert not d.take(3) and budget.used == 8 and d.held == 0
    plain = budget.hold("10.0.0.7")  # (a body that came whole: never dropped)
    assert plain.take(2) and budget.used == 10
    for h in (b1, c, plain):
        h.release()
    assert budget.used == 0 and not budget.by_peer and budget.evicted == 2


MIB = 1024 * 1024


def _other_loopback_addresses() -> list[str]:
    try:
        socket.create_server(("127.0.0.2", 0)).close()
    except OSError:
        pytest.skip("no second loopback address here (Linux routes all of 127/8)")
    return [f"127.0.0.{i}" for i in range(2, 10)]


def test_heads_declaring_32_mib_lock_nobody_out(start_proxy, up) -> None:
    """Issue 48 at its scale: 8 heads declaring 32 MiB each (904 bytes in all), from
    127.0.0.2-9, made every other client's POST a 503 for 60 s; a head holds nothing
    now. (Default limits: --max-body-mb 32, --body-budget-mb 256.)"""
    proxy = start_proxy(up.url)
    heads = [_connect(proxy.url, source) for source in _other_loopback_addresses()]
    try:
        for s in heads:
            s.sendall(_post(32 * MIB))
        wait_until(lambda: proxy.call(lambda: len(proxy.proxy.connections)) == 8)
        with _connect(proxy.url) as s:
            s.sendall(_post(11, b"hello world"))
            head, body = read_response(s)
            assert head.startswith(b"HTTP/1.1 200 ") and body == b"ok"
        assert _used(proxy) == 0
    finally:
        for s in heads:
            s.close()


def test_stalled_real_uploads_lock_nobody_out(start_proxy, up) -> None:
    """Issue 48 at its scale: 8 clients each send all but a byte of a 32 MiB body and
    stall — 256 MiB, the whole budget, real bytes. Then another client's POST: it is
    served (a stalled body is dropped to make room), and the bodies held never pass
    the budget (nor one user's share, half of it: every client here is root)."""
    proxy = start_proxy(up.url)
    budget = proxy.proxy.budget
    block = memoryview(b"x" * (32 * MIB - 1))
    uploads = [_connect(proxy.url, source) for source in _other_loopback_addresses()]
    peak = [0]
    try:
        for s in uploads:
            s.sendall(_post(32 * MIB))
            try:
                s.sendall(block)
            except OSError:
                pass  # dropped to make room while sending: the proxy closed it
            peak[0] = max(peak[0], _used(proxy))
        time.sleep(0.3)  # (what the kernel held is read)
        with _connect(proxy.url) as s:
            s.sendall(_post(11, b"hello world"))
            head, body = read_response(s, timeout=30)
            assert head.startswith(b"HTTP/1.1 200 ") and body == b"ok"
        wait_until(lambda: _used(proxy) == 4 * (32 * MIB - 1) - 32 * MIB + 1)  # 3 held
        assert peak[0] <= budget.per_peer <= budget.limit
        assert proxy.call(lambda: budget.evicted) == 5  # the 5 stalled the longest
        for s in uploads[:5]:
            s.settimeout(10)
            try:
                got = s.recv(4096)
            except ConnectionResetError:
                continue  # (closed with our unread bytes in its buffer: a reset)
            assert got.startswith(b"HTTP/1.1 503 ") and b"no progress the longest" in got
    finally:
        for s in uploads:
            s.close()
    wait_until(lambda: _used(proxy) == 0)


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
