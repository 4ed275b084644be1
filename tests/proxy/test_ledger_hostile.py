"""The proxy's ledger against hostile input and a hostile file system — the real command
(its own process) in front of the pace server, requests from raw sockets:

- a 1 MB User-Agent is refused (431) and the proxy goes on; a 60 KB one is kept as 80
  characters; a ``user`` with control characters and SQL is stored as given (bounded),
  only ever a parameter;
- 10,000 distinct API keys: every request recorded, the per-client Prometheus series
  stay bounded, and the file grows linearly (bytes per request about the same for the
  first and the second half);
- a full disk, and a read-only ledger: the proxy keeps forwarding (every request
  answered), says once that it cannot record;
- a ledger that is a symbolic link, owned by another user, or corrupted: refused with a
  clear line naming the file, and the proxy still forwards.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import socket
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.proxy_process import ProxyProcess, start_proxy_process

CHAT = {"model": "pace", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}


def _post(sock: socket.socket, headers: dict[str, str], body: dict[str, object] = CHAT) -> int:
    """One request on a kept-alive socket; the status (the body read and dropped)."""
    data = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + head.encode()
        + b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    buf = b""
    while b"\r\n\r\n" not in buf:
        got = sock.recv(65536)
        if not got:
            raise ConnectionError("closed")
        buf += got
    head_bytes, _, rest = buf.partition(b"\r\n\r\n")
    status = int(head_bytes.split(b" ", 2)[1])
    m = re.search(rb"(?i)content-length: (\d+)", head_bytes)
    n = int(m.group(1)) if m else 0
    while len(rest) < n:
        rest += sock.recv(65536)
    return status


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


@pytest.fixture
def proxy_log(tmp_path: Path) -> Path:
    return tmp_path / "proxy.log"


@pytest.fixture
def fast_pace() -> Iterator[str]:
    """A pace server that answers at once (1 ms a token): the proxy's own cost counts."""
    from tests.support import pace_server

    port, _server, stop = pace_server.start_in_thread(
        pace_server.PaceConfig(interval_ms=1, ttft_ms=1, tokens=2)
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop()


@pytest.fixture
def run_proxy(fast_pace, cli_env, proxy_log) -> Iterator:  # type: ignore[type-arg]
    url = fast_pace
    running: list[ProxyProcess] = []

    def start(*args: str) -> ProxyProcess:
        p = start_proxy_process(url, cli_env, proxy_log, "--kind", "openai", *args)
        running.append(p)
        return p

    yield start
    for p in running:
        p.stop()


def _rows(ledger: Path) -> int:
    con = sqlite3.connect(str(ledger))
    try:
        return int(con.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    finally:
        con.close()


def test_hostile_agents_and_users_are_bounded_and_only_parameters(run_proxy, tmp_path) -> None:
    ledger = tmp_path / "l.sqlite3"
    p = run_proxy("--ledger", str(ledger))
    evil_user = "x'); DROP TABLE requests; --\x1b]52;c;AAAA\x07\r\n" + "u" * 10_000
    with _connect(p.url) as s:
        assert _post(s, {"User-Agent": "M" * (1024 * 1024)}) == 431
    with _connect(p.url) as s:
        assert _post(s, {"User-Agent": "Z" * 60_000}) == 200
        assert _post(s, {"User-Agent": "curl/8.5.0"}, {**CHAT, "user": evil_user}) == 200
    assert p.stop() == 0
    con = sqlite3.connect(str(ledger))
    got = con.execute(
        "SELECT p.text, u.text FROM requests r LEFT JOIN texts p ON p.id = r.c_program "
        "LEFT JOIN texts u ON u.id = r.c_user ORDER BY r.id"
    ).fetchall()
    assert got == [("Z" * 80, None), ("curl", evil_user[:200])]
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_ten_thousand_keys_bounded_series_and_a_linear_file(run_proxy, tmp_path) -> None:
    ledger = tmp_path / "l.sqlite3"
    p = run_proxy("--ledger", str(ledger), "--top-clients", "5")
    n, lanes = 10_000, 8
    sizes: list[int] = []

    def lane(k: int, first: int, last: int) -> None:
        with _connect(p.url) as s:
            for i in range(first + k, last, lanes):
                assert _post(s, {"Authorization": f"Bearer sk-flood-{i:05d}"}) == 200

    for first, last in ((0, n // 2), (n // 2, n)):
        threads = [threading.Thread(target=lane, args=(k, first, last)) for k in range(lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with _connect(p.url) as s:  # every row written: the metrics are read after the end
            s.sendall(b"GET /infertop/metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        deadline = 60.0
        while _rows(ledger) < last and deadline > 0:
            threading.Event().wait(0.2)
            deadline -= 0.2
        con = sqlite3.connect(str(ledger))
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        sizes.append(ledger.stat().st_size)
        con.close()
    import httpx

    metrics = httpx.get(p.url + "/infertop/metrics", timeout=10).text
    clients = set(
        re.findall(r'infertop_proxy_client_requests_total\{[^}]*client="([^"]*)"', metrics)
    )
    assert 1 <= len(clients) <= 2 * 5 + 1 and "other" in clients
    total = sum(
        int(v) for v in re.findall(r"infertop_proxy_client_requests_total\{[^}]*\} (\d+)", metrics)
    )
    assert total == n
    assert _rows(ledger) == n
    con = sqlite3.connect(str(ledger))
    keys = con.execute("SELECT COUNT(DISTINCT c_key) FROM requests").fetchone()[0]
    con.close()
    assert keys == n
    first, second = sizes[0], sizes[1] - sizes[0]
    assert 0.7 < second / first < 1.3, sizes  # linear: the second half costs what the first did
    assert b"sk-flood" not in ledger.read_bytes()


def _root_or_skip() -> None:
    if os.getuid() != 0:
        pytest.skip("needs root (a tmpfs mount, a file given to another user)")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    _root_or_skip()
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mnt)])
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_a_full_disk_the_proxy_forwards_and_says_once(run_proxy, small_disk, proxy_log) -> None:
    ledger = small_disk / "l.sqlite3"
    p = run_proxy("--ledger", str(ledger))
    with _connect(p.url) as s:
        for i in range(200):  # far more than 160 KiB of rows and WAL
            assert _post(s, {"User-Agent": f"agent-{i:04d}-" + "y" * 70}) == 200
    assert p.stop() == 0
    log = proxy_log.read_text()
    assert log.count("cannot record") == 1, log[-3000:]
    assert "full" in log


def test_a_read_only_ledger_the_proxy_forwards_and_says_once(
    run_proxy, small_disk, proxy_log
) -> None:
    ledger = small_disk / "l.sqlite3"
    p = run_proxy("--ledger", str(ledger))
    with _connect(p.url) as s:
        assert _post(s, {}) == 200
    assert p.stop() == 0
    assert _rows(ledger) == 1
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    p = run_proxy("--ledger", str(ledger))
    with _connect(p.url) as s:
        for _ in range(20):
            assert _post(s, {}) == 200
    assert p.stop() == 0
    log = proxy_log.read_text()
    said = [
        x
        for x in log.splitlines()
        if "ledger" in x and str(ledger) in x and "ledger:" not in x[:30]
    ]
    assert len([x for x in said if "ledger off" in x or "cannot record" in x]) == 1, log[-3000:]


def test_a_symlinked_or_foreign_ledger_is_refused_and_the_proxy_forwards(
    run_proxy, tmp_path, proxy_log
) -> None:
    target = tmp_path / "target.sqlite3"
    target.write_bytes(b"")
    link = tmp_path / "link.sqlite3"
    link.symlink_to(target)
    p = run_proxy("--ledger", str(link))
    with _connect(p.url) as s:
        assert _post(s, {}) == 200
    p.stop()
    assert target.read_bytes() == b""
    assert f"ledger off: {link}: is a symbolic link: refused" in proxy_log.read_text()
    if os.getuid() != 0:
        return
    foreign = tmp_path / "foreign.sqlite3"
    foreign.write_bytes(b"")
    nobody = pwd.getpwnam("nobody")
    os.chown(foreign, nobody.pw_uid, nobody.pw_gid)
    p = run_proxy("--ledger", str(foreign))
    with _connect(p.url) as s:
        assert _post(s, {}) == 200
    p.stop()
    assert f"ledger off: {foreign}: owned by another user (uid {nobody.pw_uid}): refused" in (
        proxy_log.read_text()
    )


def test_a_corrupted_ledger_is_named_and_the_proxy_forwards(run_proxy, tmp_path, proxy_log) -> None:
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    os.chmod(bad, 0o600)
    p = run_proxy("--ledger", str(bad))
    with _connect(p.url) as s:
        assert _post(s, {}) == 200
    p.stop()
    log = proxy_log.read_text()
    assert f"ledger off: {bad}: not a usable ledger" in log, log[-2000:]
