"""What the proxy gives other tools: Prometheus text, the JSONL events file, the live
stream and one request's detail — bounded labels, no text of anyone's request in the
first three, and never a credential anywhere."""

from __future__ import annotations

import json
import os
import stat
import time

import httpx

from tests.proxy.proxy_support import wait_until
from tui.core.metrics import RequestMetrics
from tui.core.session import read_session
from tui.core.session_check import record_problem
from tui.proxy.exposition import ProxyMetrics
from tui.proxy.routes import MAX_MODEL_LABELS
from tui.proxy.rows import RequestState
from tui.transport.prometheus import parse

SECRETS = ("sk-SECRET-bearer-1", "SECRET-x-api-key-2", "SECRET-query-3", "SECRET-cookie-4")
PROMPT = "the prompt nobody else should read"


def _metrics(**kw) -> RequestMetrics:  # type: ignore[no-untyped-def]
    base = dict(ttft_ms=50.0, ttfr_ms=40.0, e2e_ms=500.0, itl_token_ms=[10.0, 12.0, 11.0])
    base.update(output_tokens=4, output_tokens_source="usage", prompt_tokens=7)
    base.update(kw)
    return RequestMetrics(**base)


def test_the_exposition_parses_and_its_histograms_add_up() -> None:
    pm = ProxyMetrics("127.0.0.1:8080", "llama-server")
    for _ in range(3):
        pm.generation_ended("m", "/v1/chat/completions", RequestState.DONE, True, _metrics())
    pm.generation_ended(
        "m", "/v1/chat/completions", RequestState.FAILED, True, _metrics(ttft_ms=None)
    )
    pm.generation_ended(
        "m",
        "/v1/chat/completions",
        RequestState.CANCELLED,
        True,
        _metrics(output_tokens_source="chunk-count-estimate"),
    )
    pm.other_request("/v1/models", False, False)
    s = parse(pm.render().decode())
    lab = {"upstream": "127.0.0.1:8080", "model": "m", "route": "/v1/chat/completions"}
    assert s.total("infertop_proxy_requests_total", **lab) == 5
    assert s.total("infertop_proxy_requests_failed_total", **lab) == 1
    assert s.total("infertop_proxy_requests_cancelled_total", **lab) == 1
    assert s.total("infertop_proxy_output_tokens_total", **lab) == 20
    assert s.total("infertop_proxy_output_tokens_estimated_total", **lab) == 4
    assert s.total("infertop_proxy_prompt_tokens_total", **lab) == 35
    assert s.total("infertop_proxy_ttft_seconds_count", **lab) == 4
    assert s.total("infertop_proxy_itl_seconds_count", **lab) == 15
    assert s.total("infertop_proxy_itl_seconds_bucket", le="0.01", **lab) == 5
    assert s.total("infertop_proxy_itl_seconds_bucket", le="0.02", **lab) == 15
    assert s.total("infertop_proxy_itl_seconds_bucket", le="+Inf", **lab) == 15
    assert abs(s.total("infertop_proxy_itl_seconds_sum", **lab) - 0.165) < 1e-9
    assert s.total("infertop_proxy_requests_total", route="/v1/models") == 1
    assert s.total("infertop_proxy_info", kind="llama-server") == 1


def test_a_requests_series_exist_at_zero_while_it_runs(pace, start_proxy) -> None:
    """Prometheus' rate() counts growth between two samples only: a series first seen
    already holding the first request's tokens would lose them. So they exist at 0 from
    the moment a request for their (model, route) starts."""
    url, _ = pace
    proxy = start_proxy(url)
    lab = {"model": "pace", "route": "/v1/chat/completions"}
    body = {"model": "pace", "stream": True, "max_tokens": 60, "messages": []}
    with httpx.Client(timeout=10) as c:
        assert (
            "infertop_proxy_output_tokens_total{" not in c.get(proxy.url + "/infertop/metrics").text
        )
        with c.stream("POST", proxy.url + "/v1/chat/completions", json=body) as r:
            lines = r.iter_lines()
            next(lines)  # the answer is streaming
            during = parse(c.get(proxy.url + "/infertop/metrics").text)
            for _ in lines:
                pass
        wait_until(lambda: proxy.call(lambda: proxy.proxy.metrics.in_flight) == 0)
        after = parse(c.get(proxy.url + "/infertop/metrics").text)
    for name in (
        "requests_total",
        "output_tokens_total",
        "ttft_seconds_count",
        "e2e_seconds_count",
    ):
        assert during.total("infertop_proxy_" + name, **lab) == 0, name
    assert during.total("infertop_proxy_requests_in_flight") == 1
    assert after.total("infertop_proxy_requests_total", **lab) == 1
    assert after.total("infertop_proxy_output_tokens_total", **lab) == 60


def test_labels_from_clients_are_escaped_and_bounded() -> None:
    pm = ProxyMetrics('up"stream', "openai")
    hostile = ['a"b\\c\nd', "x" * 500, "\x1b]52;c;AAAA\x07", "}", "model with spaces"]
    for name in hostile + [f"m{i}" for i in range(50)]:
        pm.generation_ended(name, "/v1/chat/completions", RequestState.DONE, True, _metrics())
    pm.generation_ended("m", "/no/such/route/../x?key=SECRET", RequestState.DONE, True, _metrics())
    text = pm.render().decode()
    s = parse(text)
    models = {dict(k)["model"] for k in s.samples["infertop_proxy_requests_total"]}
    routes = {dict(k)["route"] for k in s.samples["infertop_proxy_requests_total"]}
    assert 'a"b\\c\nd' in models and "x" * 64 in models and "other" in models
    assert len(models) == MAX_MODEL_LABELS + 1
    assert routes == {"/v1/chat/completions", "other"} and "SECRET" not in text


def _secret_request(url: str) -> None:
    body = {
        "model": "pace",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": PROMPT}],
    }
    headers = {
        "Authorization": f"Bearer {SECRETS[0]}",
        "x-api-key": SECRETS[1],
        "Cookie": f"session={SECRETS[3]}",
    }
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions?key={SECRETS[2]}", json=body, headers=headers
    ) as r:
        assert r.status_code == 200
        r.read()


def test_outputs_hold_no_text_and_no_credential(pace, start_proxy, tmp_path) -> None:
    url, server = pace
    events = tmp_path / "private" / "events.jsonl"
    proxy = start_proxy(url, events_path=events)
    lines: list[str] = []
    with httpx.Client(timeout=10) as c:
        with c.stream("GET", proxy.url + "/infertop/events") as stream:
            it = stream.iter_lines()
            lines.append(next(it))  # hello
            _secret_request(proxy.url)
            _secret_request(proxy.url)
            while sum('"event":"end"' in x for x in lines) < 2:
                lines.append(next(it))
    # the upstream got every credential, unchanged
    assert server.stats.last_headers["authorization"] == f"Bearer {SECRETS[0]}"
    assert server.stats.last_headers["x-api-key"] == SECRETS[1]
    wait_until(lambda: proxy.call(lambda: proxy.proxy.events.written) == 2)
    metrics = httpx.get(proxy.url + "/infertop/metrics").text
    rid = json.loads(lines[-1])["row"]["id"]
    detail = httpx.get(f"{proxy.url}/infertop/requests/{rid}").text
    with_text = httpx.get(f"{proxy.url}/infertop/requests/{rid}?text=1").json()
    file_text = events.read_text()
    for where, text in (
        ("metrics", metrics),
        ("events", "\n".join(lines)),
        ("file", file_text),
        ("detail", detail),
        ("detail+text", json.dumps(with_text)),
    ):
        for secret in SECRETS:
            assert secret not in text, (where, secret)
        if where != "detail+text":
            assert PROMPT not in text and "tok0" not in text, where
    # the text is there only when asked for, and it is the request's own
    assert with_text["text"]["request"] == f"user: {PROMPT}"
    assert with_text["text"]["response"].startswith("tok0 tok1")
    # the events file: the session log's format, private, every record usable
    assert stat.S_IMODE(os.stat(events).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(events.parent).st_mode) == 0o700
    result = read_session(events)
    assert result.bad_lines == [] and len(result.records) == 2
    for rec in result.records:
        assert record_problem(rec) is None and rec["slot"] == "proxy"
        assert rec["text"] == "" and rec["prompt"] == "" and rec["messages"] == []
        assert rec["metrics"]["output_tokens"] == 16 and rec["proxy"]["text_withheld"]
        assert {c[1] for c in rec["timeline"]["chunks"]} <= {"", "…"}
        assert rec["params"]["route"] == "/v1/chat/completions"


def test_the_live_stream_and_the_detail(pace, start_proxy) -> None:
    url, _ = pace
    proxy = start_proxy(url)
    seen: list[dict] = []
    with httpx.Client(timeout=10) as c:
        with c.stream("GET", proxy.url + "/infertop/events") as stream:
            it = stream.iter_lines()
            hello = json.loads(next(it))
            assert hello["event"] == "hello" and hello["rows"] == []
            assert hello["proxy"]["upstream"] == url and hello["proxy"]["listen"] == proxy.url
            body = {"model": "pace", "stream": True, "max_tokens": 120, "messages": []}
            with c.stream("POST", proxy.url + "/v1/chat/completions", json=body) as r:
                for x in it:  # 1.2 s of tokens: at least one tick (2 a second) sees it
                    seen.append(json.loads(x))
                    if seen[-1]["event"] == "end" or (
                        seen[-1]["event"] == "tick" and seen[-1]["rows"]
                    ):
                        break
                r.read()
            while seen[-1]["event"] != "end":
                seen.append(json.loads(next(it)))
    kinds = [e["event"] for e in seen]
    assert kinds[0] == "start" and "tick" in kinds and kinds[-1] == "end"
    live = next(e for e in seen if e["event"] == "tick" and e["rows"])["rows"][0]
    assert live["state"] in ("prefill", "decoding") and live["route"] == "/v1/chat/completions"
    end = seen[-1]
    assert end["row"]["state"] == "done" and end["row"]["output_tokens"] == 120
    assert end["metrics"]["output_tokens_estimated"] is True  # no usage asked for
    assert seen[-1]["row"]["id"] == seen[0]["row"]["id"]
    d = httpx.get(f"{proxy.url}/infertop/requests/{end['row']['id']}").json()
    assert len(d["chunks"]) == 120 and d["timeline_kept"] and "text" not in d
    assert d["stamp_source"].startswith(("kernel", "time the read"))
    assert httpx.get(proxy.url + "/infertop/requests/nope").status_code == 404
    assert httpx.get(proxy.url + "/infertop/nothing").status_code == 404
    assert httpx.post(proxy.url + "/infertop/metrics").status_code == 405


def test_watching_is_for_loopback_clients_only(pace, start_proxy) -> None:
    """Listening on every address, the proxy forwards and serves /infertop/metrics to
    a client on another address, but not the stream or anyone's request."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
        except OSError:
            ip = "127.0.0.1"
    if ip.startswith("127."):
        import pytest

        pytest.skip("this machine has no address beyond loopback")
    url, _ = pace
    proxy = start_proxy(url, listen_host="0.0.0.0")
    port = proxy.url.rsplit(":", 1)[1]
    outside = f"http://{ip}:{port}"
    assert httpx.get(outside + "/v1/models").status_code == 200
    assert httpx.get(outside + "/infertop/metrics").status_code == 200
    for path in ("/infertop/events", "/infertop/requests/x"):
        r = httpx.get(outside + path)
        assert r.status_code == 403 and "the proxy's own user" in r.text


WATCH_AS = """
import os, socket, sys
host, port = sys.argv[1][7:].split(":")
"x".encode("idna")  # the codec a socket address needs, loaded while /root is readable
os.setgid(65534); os.setuid(65534)  # nobody (everything imported before: /root is closed)
for path in ("/infertop/events", "/infertop/requests/x", "/infertop/metrics", "/v1/models"):
    with socket.create_connection((host, int(port)), timeout=5) as s:
        head = b"GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n"
        s.sendall(head % path.encode())
        print(path, s.recv(64).split()[1].decode())
"""


def test_another_user_on_the_same_machine_cannot_watch(pace, start_proxy) -> None:
    """Loopback is no boundary between users: a process of another user connecting to
    127.0.0.1 may use the upstream through the proxy, and read its metrics, but neither
    the live stream nor anyone's request (the peer socket's owner, by netlink)."""
    import subprocess
    import sys

    import pytest

    if os.geteuid() != 0 or not os.path.exists("/proc/net/tcp"):
        pytest.skip("needs root (to become another user) and Linux's /proc/net/tcp")
    url, _ = pace
    proxy = start_proxy(url)
    out = subprocess.run(
        [sys.executable, "-c", WATCH_AS, proxy.url], capture_output=True, text=True, timeout=30
    )
    codes = dict(line.split() for line in out.stdout.splitlines())
    assert codes == {
        "/infertop/events": "403",
        "/infertop/requests/x": "403",
        "/infertop/metrics": "200",
        "/v1/models": "200",
    }, out.stderr
    # and the proxy's own user may
    assert httpx.get(proxy.url + "/infertop/requests/x").status_code == 404


def test_a_watcher_that_reads_nothing_is_dropped(pace, start_proxy) -> None:
    url, _ = pace
    proxy = start_proxy(url)
    host, port = proxy.url[7:].split(":")
    import socket

    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /infertop/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    wait_until(lambda: proxy.call(lambda: len(proxy.proxy.book.watchers)) == 1)
    big = "x" * 100_000
    for _ in range(100):  # lines it never reads: 10 MB
        proxy.call(lambda: proxy.proxy.book.publish({"event": "tick", "rows": [], "pad": big}))
        if proxy.call(lambda: len(proxy.proxy.book.watchers)) == 0:
            break
        time.sleep(0.01)
    assert proxy.call(lambda: len(proxy.proxy.book.watchers)) == 0
    s.close()
