"""Busy time attributed per client, against a real llama-server with two slots (``-np 2``)
on a schedule whose answer is known: client A alone for 2 s, then A and B together for
2 s (both hang up at 4 s) → A 2 + 2/2 = 3 s, B 2/2 = 1 s (tui/core/attribution.py).

Checked three ways: each client's busy seconds against the definition (A ≈ 3 s, B ≈ 1 s,
exactly as computed from the requests' own stamps); their sum against the wall-clock time
at least one request was in flight (within 1 %); and that time against the server's own
view of being busy, its ``/slots`` ``is_processing`` sampled every 50 ms (within 5 %).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import real_servers as servers
from tui.core.outcome import ClientIdentity
from tui.ledger.store import connect
from tui.ledger.usage import usage
from tui.ledger.writer import LedgerSink
from tui.proxy.server import ProxyConfig, ProxyThread

pytestmark = pytest.mark.engine
SLOTS_EVERY_S = 0.05


@pytest.fixture(scope="module")
def two_slots(smollm2_gguf: Path, server_logs: Path) -> Iterator[servers.ServerProcess]:
    with servers.running_llama_server(
        smollm2_gguf, server_logs, ["-np", "2", "-c", "4096"], "llama-server -np 2"
    ) as sp:
        yield sp


def _stream(url: str, user: str, seconds: float) -> None:
    """A long answer (it would run far longer) that its client hangs up on at ``seconds``."""
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Count from 1 to 5000, one number a line."}],
        "max_tokens": 2000,
        "stream": True,
        "user": user,
        "ignore_eos": True,
    }
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=30) as c:
        with c.stream("POST", url + "/v1/chat/completions", json=body) as r:
            for _ in r.iter_raw():
                if time.monotonic() >= deadline:
                    break  # the client hangs up: the request ends here


def test_a_alone_then_a_and_b_is_a_three_b_one(two_slots, tmp_path) -> None:
    ledger = tmp_path / "l.sqlite3"
    sink = LedgerSink(ledger)
    proxy = ProxyThread(ProxyConfig(upstream=two_slots.url, kind="llama-server", listen_port=0))
    proxy.outcomes.add(sink)
    proxy.start()
    busy_samples: list[tuple[float, bool]] = []
    stop = threading.Event()

    def sample_slots() -> None:
        with httpx.Client(timeout=5) as c:
            while not stop.is_set():
                t = time.time()
                slots = json.loads(c.get(two_slots.url + "/slots").content)
                busy_samples.append((t, any(s.get("is_processing") for s in slots)))
                stop.wait(max(0.0, SLOTS_EVERY_S - (time.time() - t)))

    sampler = threading.Thread(target=sample_slots)
    sampler.start()
    try:
        time.sleep(0.3)
        a = threading.Thread(target=_stream, args=(proxy.url, "A", 4.0))
        a.start()
        time.sleep(2.0)
        _stream(proxy.url, "B", 2.0)
        a.join()
        time.sleep(0.5)
    finally:
        stop.set()
        sampler.join()
        proxy.stop()
        sink.close()
    con = connect(ledger)
    rows = {
        u: (t0, e2e)
        for u, t0, e2e in con.execute(
            "SELECT t.text, r.t0, r.e2e_s FROM requests r JOIN texts t ON t.id = r.c_user"
        )
    }
    (a0, a_e2e), (b0, b_e2e) = rows["A"], rows["B"]
    got = {g.key[0]: g.busy_s for g in usage(con, a0 - 1, by=("client",)).groups}
    u = usage(con, a0 - 1)
    # the definition, from the requests' own stamps: A alone until B starts, then shared
    a1, b1 = a0 + a_e2e, b0 + b_e2e
    both = max(0.0, min(a1, b1) - b0)
    want_a = (b0 - a0) + both / 2 + max(0.0, a1 - b1)
    want_b = both / 2 + max(0.0, b1 - a1)
    assert got["A"] == pytest.approx(want_a, abs=1e-5) and got["B"] == pytest.approx(
        want_b, abs=1e-5
    )
    assert got["A"] == pytest.approx(3.0, abs=0.25) and got["B"] == pytest.approx(1.0, abs=0.25)
    # the shares add up to the time at least one request was in flight (within 1 %)
    wall = max(a1, b1) - a0
    assert sum(got.values()) == pytest.approx(wall, rel=0.01)
    assert u.busy_wall_s == pytest.approx(wall, rel=0.01)
    # which is the server's own view of being busy, sampled every 50 ms (within 5 %)
    busy = sum(t1 - t0 for (t0, was), (t1, _n) in zip(busy_samples, busy_samples[1:]) if was)
    print(f"busy A {got['A']:.3f} s, B {got['B']:.3f} s; in flight {wall:.3f} s; ", end="")
    print(f"/slots busy {busy:.3f} s")
    assert busy == pytest.approx(wall, rel=0.05), (busy, wall, len(busy_samples))
    assert ClientIdentity(user="A").label == "A"
