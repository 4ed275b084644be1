"""The pace server's /stamps: its real token send times, on the shared perf_counter clock."""

from __future__ import annotations

import json
import time
import urllib.request

from tests.support import pace_server


def _post(port: int, body: dict) -> bytes:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


def test_stamps_are_the_send_times_of_each_token():
    port, _server, stop = pace_server.start_in_thread(pace_server.PaceConfig(interval_ms=5.0))
    try:
        t_before = time.perf_counter_ns()
        raw = _post(port, {"stream": True, "max_tokens": 20, "messages": []})
        t_after = time.perf_counter_ns()
        assert raw.count(b"tok") == 20
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stamps", timeout=10) as r:
            body = json.loads(r.read())
    finally:
        stop()
    sent = body["sent_ns"]["pace-1"]
    assert body["clock"] == "time.perf_counter_ns" and len(sent) == 20
    assert t_before < sent[0] and sent[-1] < t_after  # same clock as this process
    assert all(b > a for a, b in zip(sent, sent[1:], strict=False))
    # absolute schedule: token i is not sent before start + ttft (5 ms) + i × 5 ms
    assert (sent[-1] - t_before) / 1e6 >= 5.0 + 19 * 5.0
    # the request read whole: after it was written, and the first token one TTFT later
    received = body["received_ns"]["pace-1"]
    assert t_before < received < sent[0]
    assert (sent[0] - received) / 1e6 >= 5.0
    # and just before each write: after the previous token's send, before its own
    before = body["write_ns"]["pace-1"]
    assert len(before) == 20 and received < before[0] <= sent[0]
    assert all(s0 <= b1 <= s1 for s0, b1, s1 in zip(sent, before[1:], sent[1:], strict=False))
