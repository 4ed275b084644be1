"""The proxy publishes one RequestOutcome per finished generation request (done, failed,
cancelled) to its Outcomes fan-out, and none for any other request."""

from __future__ import annotations

import socket
import time

import httpx

from tests.proxy.proxy_support import wait_until
from tests.support import fault_server
from tests.support.made_outcomes import KeptOutcomes
from tui.core.outcome import Outcomes

CHAT = {"model": "pace", "messages": [{"role": "user", "content": "one two three"}]}


def test_done_failed_and_cancelled_each_publish_one_outcome(pace, start_proxy) -> None:
    url, _server = pace
    keep = KeptOutcomes()
    outcomes = Outcomes()
    outcomes.add(keep)
    proxy = start_proxy(url, outcomes=outcomes)
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}, "user": "ann"}
    t_before = time.time()
    with httpx.Client(base_url=proxy.url, timeout=10) as c:
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            r.read()
        assert c.get("/v1/models").status_code == 200  # not generation: no outcome
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:  # sent, then hung up early
        raw = httpx.Request("POST", proxy.url + "/v1/chat/completions", json=body)
        data = raw.read()
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)
        )
        s.recv(100)
    wait_until(lambda: len(keep.seen) >= 2)
    done, cancelled = keep.seen[0], keep.seen[1]
    assert done.source == "proxy" and done.state == "done" and done.streamed is True
    assert (done.route, done.api, done.model) == ("/v1/chat/completions", "openai-chat", "pace")
    assert done.upstream == url and done.client.address == "127.0.0.1"
    assert done.metrics.output_tokens == 16 and done.metrics.prompt_tokens == 3
    assert t_before - 1 < done.t0_wall < time.time() and 0.15 < done.e2e_s < 5
    assert cancelled.state == "cancelled" and cancelled.id != done.id

    port_f, _f, stop = fault_server.start_in_thread()
    try:
        failing = start_proxy(f"http://127.0.0.1:{port_f}/500", outcomes=outcomes)
        httpx.post(failing.url + "/v1/chat/completions", json=body, timeout=10)
        wait_until(lambda: len(keep.seen) >= 3)
    finally:
        stop()
    failed = keep.seen[2]
    assert failed.state == "failed" and failed.error_kind == "http"
    assert len(keep.seen) == 3  # the model list published nothing


def test_who_sent_it_fingerprint_user_program_and_process(pace, start_proxy) -> None:
    import os

    from tui.proxy.identity import ClientKeys
    from tui.proxy.peer_process import LookupState

    url, _server = pace
    keys = ClientKeys(b"s" * 32, {})
    keys.names[keys.fingerprint(b"sk-alice")] = "alice"
    keep = KeptOutcomes()
    outcomes = Outcomes()
    outcomes.add(keep)
    proxy = start_proxy(url, outcomes=outcomes, client_keys=keys, find_processes=True)
    body = {**CHAT, "stream": True, "metadata": {"user_id": "u-7"}}
    heads = {"Authorization": "Bearer sk-bob", "User-Agent": "Anthropic/Python 0.40.0"}

    def looked_up() -> bool:
        conns = proxy.call(lambda: [c.process.state for c in proxy.proxy.connections])
        return bool(conns) and all(state is LookupState.DONE for state in conns)

    with httpx.Client(base_url=proxy.url, timeout=10, headers=heads) as c:
        for i in range(2):  # the second on the same connection, once its process is found
            if i == 1:
                wait_until(looked_up)  # (off the request's path, on a thread: it may lag)
            with c.stream("POST", "/v1/chat/completions", json=body) as r:
                r.read()
    httpx.post(
        proxy.url + "/v1/chat/completions",
        json={**CHAT, "stream": True},
        headers={"x-api-key": "sk-alice", "User-Agent": "curl/8.5.0"},
        timeout=10,
    )
    wait_until(lambda: len(keep.seen) >= 3)
    bob, alice = keep.seen[1].client, keep.seen[2].client
    assert bob.key_fingerprint == keys.fingerprint(b"sk-bob") and bob.name is None
    assert bob.key_fingerprint.startswith("k:") and len(bob.key_fingerprint) == 14
    assert (bob.user, bob.program, bob.label) == ("u-7", "anthropic-sdk (python)", "u-7")
    assert bob.process is not None and bob.process.endswith(f"[{os.getpid()}]")
    assert (alice.name, alice.program, alice.label) == ("alice", "curl", "alice")
    assert "sk-" not in repr(keep.seen)  # no key anywhere in what sinks get
