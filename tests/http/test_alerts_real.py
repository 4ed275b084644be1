"""Alerts on live traffic, end to end: ``infertop proxy --alerts FILE`` (headless, a
subprocess) in front of a real llama-server with one slot (``-np 1``). Concurrent long
prompts queue behind each other, so TTFT climbs: the TTFT rule fires once, at a webhook
receiver on loopback, naming the requests that were over its threshold (the proxy's own
request ids, as its events file has them); short prompts then bring TTFT down and it
resolves once. The alert state is on /infertop/metrics while it fires. And a webhook that
hangs holds up no request."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tui.core.session import read_session

pytestmark = pytest.mark.engine

RULES = """
[alerting]
webhook = "{hook}"
webhook_timeout_s = 2
log = "{log}"

[[alerts]]
name = "slow first token"
metric = "ttft"
stat = "p50"
above = {above}
resolve_below = {resolve}
window_s = {window}
cooldown_s = 0
min_samples = {min_samples}
"""


class Hook:
    """A webhook receiver on loopback: keeps each POSTed JSON object (or hangs)."""

    def __init__(self, hang_s: float = 0.0) -> None:
        self.got: list[dict[str, Any]] = []
        self.tries = 0
        hook = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.tries += 1
                if hang_s:
                    time.sleep(hang_s)
                hook.got.append(json.loads(body))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alert"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.stop()


def _start_proxy(upstream: str, rules: str, tmp_path, cli_env) -> tuple[subprocess.Popen[str], str]:
    f = tmp_path / "alerts.toml"
    f.write_text(rules)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "proxy", "--upstream", upstream, "--listen",
         "127.0.0.1:0", "--alerts", str(f), "--events", str(tmp_path / "events.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("infertop proxy listening on "), proc.stderr.read()[-2000:]  # type: ignore[union-attr]
    return proc, line.split()[-1]


def _ask(url: str, words: int, tag: str) -> float:
    """One chat request of about ``words`` prompt tokens (no prefix reuse); seconds."""
    text = f"{tag}: " + " ".join(f"w{i}" for i in range(words))
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 2,
        "stream": True,
        "cache_prompt": False,
    }
    t0 = time.monotonic()
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200
    return time.monotonic() - t0


def _wait(cond: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_ttft_rule_fires_once_and_resolves_once(llama_server, hook, tmp_path, cli_env) -> None:
    # one slot: the second and third long prompt wait for the ones before them
    # the median over a window long enough for the slow phase on a loaded machine: it
    # fires once the three are in, and resolves once the short ones outnumber them
    rules = RULES.format(
        hook=hook.url,
        log=tmp_path / "alerts.jsonl",
        above=2500,
        resolve=1200,
        window=600,
        min_samples=3,
    )
    proc, url = _start_proxy(llama_server.url, rules, tmp_path, cli_env)
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda i: _ask(url, 200, f"long {i}"), range(3)))
        _wait(lambda: any(e["state"] == "firing" for e in hook.got), 30, "no firing event")
        metrics = httpx.get(url + "/infertop/metrics").text
        assert 'ALERTS{alertname="slow first token",alertstate="firing",metric="ttft"} 1' in metrics
        # short prompts until it resolves (they become the window's median)
        deadline = time.monotonic() + 120
        while not any(e["state"] == "resolved" for e in hook.got):
            assert time.monotonic() < deadline, "no resolved event"
            _ask(url, 5, "short")
            time.sleep(0.3)
        for _ in range(5):  # and it stays resolved, fired once
            _ask(url, 5, "short")
        time.sleep(1.5)
        events = read_session(tmp_path / "events.jsonl").records
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert [e["state"] for e in hook.got] == ["firing", "resolved"], err[-2000:]
    fired, resolved = hook.got
    ttft = {r["request_id"]: r["metrics"]["ttft_ms"] for r in events}
    slow = {rid for rid, t in ttft.items() if t is not None and t > 2500}
    assert len(slow) >= 1 and set(fired["request_ids"]) <= slow
    assert fired["request_ids"] and fired["value"] > 2500 and fired["threshold"] == 2500
    assert len(fired["request_ids"]) >= 2  # the long ones that waited (the first may not)
    assert fired["window_s"] == 600 and fired["upstream"] == llama_server.url
    assert fired["rule"] == "slow first token" and resolved["resolve_threshold"] == 1200
    assert resolved["value"] < 1200
    logged = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [x["state"] for x in logged] == ["firing", "resolved"]
    assert "alert firing slow first token" in err and "alert resolved slow first token" in err


def test_a_hanging_webhook_holds_up_no_request(llama_server, tmp_path, cli_env) -> None:
    hung = Hook(hang_s=30)
    rules = RULES.format(
        hook=hung.url,
        log=tmp_path / "a.jsonl",
        above=0.001,
        resolve=0.0005,
        window=60,
        min_samples=1,
    )
    proc, url = _start_proxy(llama_server.url, rules, tmp_path, cli_env)
    try:
        first = _ask(url, 5, "first")  # fires: the webhook is POSTed and hangs
        _wait(lambda: hung.tries >= 1, 10, "the webhook was not called")
        times = [_ask(url, 5, f"next {i}") for i in range(5)]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        hung.stop()
    # every request answered while the webhook hung; none waited for it (2 s limit, 2 tries)
    assert max(times) < max(5 * first, first + 1.5), (first, times)
