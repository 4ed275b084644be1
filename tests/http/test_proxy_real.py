"""``infertop proxy`` in front of real engines, with real clients.

Real: llama.cpp's llama-server and vLLM's CPU server on SmolLM2, the official ``openai``
Python SDK, the ``ollama`` Python client, curl, Prometheus (Debian's) and ``infertop
fleet --prometheus``. **The Ollama server is the emulator** (tests/support/ollama_emulator.py,
real generation; Ollama itself cannot be installed here).

Byte equality: the same request sent straight to the engine and through the proxy gives
the same status, the same end-to-end headers in the same order, and the same body bytes
once the fields an engine makes fresh per answer are masked (ids, creation times,
llama-server's ``timings`` numbers, Ollama's durations and ``created_at``). Each pair is
sent after a warm-up, greedy, so the engine's own answer is the same both times.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.support import prometheus_server as ps
from tests.support.same_bytes import exchange, masked
from tui.proxy.server import ProxyConfig, ProxyThread

pytestmark = pytest.mark.engine

CHAT = [{"role": "user", "content": "Name three colours."}]


def assert_same_bytes(direct_url: str, proxy_url: str, path: str, body: dict) -> bytes:
    exchange(direct_url, path, body)  # warm-up: caches the prompt where the engine does
    direct = exchange(direct_url, path, body)
    through = exchange(proxy_url, path, body)
    assert through[0] == direct[0] == 200
    assert through[1] == direct[1]
    body_through = masked(through[2])
    assert body_through == masked(direct[2])
    return body_through


@pytest.fixture
def proxy_for():  # type: ignore[no-untyped-def]
    running: list[ProxyThread] = []

    def start(upstream: str, kind: str) -> ProxyThread:
        t = ProxyThread(ProxyConfig(upstream=upstream, kind=kind, listen_port=0))
        t.start()
        running.append(t)
        return t

    yield start
    for t in running:
        t.stop()


def last(proxy: ProxyThread, n: int = 1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 30
    while proxy.call(lambda: len(proxy.proxy.book.recent)) < n:
        assert time.monotonic() < deadline, "no record"
        time.sleep(0.05)
    return proxy.call(lambda: list(proxy.proxy.book.recent))


# -- llama-server --------------------------------------------------------------------------
def test_llama_server_bytes_through_the_proxy_are_the_engines(llama_server, proxy_for) -> None:
    proxy = proxy_for(llama_server.url, "llama-server")
    base = {"messages": CHAT, "max_tokens": 24, "temperature": 0, "cache_prompt": False}
    for stream in (True, False):
        body = {**base, "stream": stream}
        out = assert_same_bytes(llama_server.url, proxy.url, "/v1/chat/completions", body)
        assert (b"data: [DONE]" in out) == stream
    body = {"prompt": "Once upon a time", "n_predict": 16, "temperature": 0, "stream": True}
    assert_same_bytes(llama_server.url, proxy.url, "/completion", body)


def test_openai_sdk_through_the_proxy_measured_beside_llama_servers_account(
    llama_server, proxy_for
) -> None:
    import openai

    proxy = proxy_for(llama_server.url, "llama-server")
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-not-needed")
    kw = dict(model="smollm2", messages=CHAT, max_tokens=32, temperature=0)
    extra = {"cache_prompt": False}
    chunks = list(client.chat.completions.create(stream=True, extra_body=extra, **kw))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    whole = client.chat.completions.create(extra_body=extra, **kw)
    assert streamed == whole.choices[0].message.content and streamed
    usage = client.chat.completions.create(
        stream=True, stream_options={"include_usage": True}, extra_body=extra, **kw
    )
    counted = [c.usage for c in usage if c.usage is not None][-1]
    recs = last(proxy, 3)
    s, w, u = recs
    assert [r.stream for r in recs] == [True, False, True]
    assert all(r.state == "done" for r in recs)
    # tokens: the engine's count every time (timings when no usage was asked for)
    assert s.metrics.output_tokens == w.metrics.output_tokens == counted.completion_tokens
    assert u.metrics.output_tokens_source == s.metrics.output_tokens_source == "usage"
    assert u.metrics.prompt_tokens == counted.prompt_tokens == s.metrics.prompt_tokens
    assert s.timeline.text == streamed
    # reconciliation with llama-server's own account (as `infertop run` reports it)
    for r in (s, u):
        m = r.metrics
        assert m.engine_prefill_ms is not None and m.prefill_tps_source == "engine"
        assert 0 <= m.ttft_minus_engine_prefill_ms < 200, m.ttft_minus_engine_prefill_ms
        assert 0.7 < m.decode_tps_vs_engine < 1.3, m.decode_tps_vs_engine
    assert w.row().ttft_ms is None and w.metrics.engine_decode_tps is not None


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_curl_n_streams_through_the_proxy(llama_server, proxy_for) -> None:
    proxy = proxy_for(llama_server.url, "llama-server")
    body = json.dumps({"messages": CHAT, "max_tokens": 16, "temperature": 0, "stream": True})
    cmd = ["curl", "-sN", "-H", "Content-Type: application/json", "-d", body]
    direct = subprocess.run([*cmd, llama_server.url + "/v1/chat/completions"],
                            capture_output=True, timeout=60, check=True).stdout  # fmt: skip
    through = subprocess.run([*cmd, proxy.url + "/v1/chat/completions"],
                             capture_output=True, timeout=60, check=True).stdout  # fmt: skip
    assert masked(through) == masked(direct) and through.endswith(b"data: [DONE]\n\n")


def test_a_client_that_goes_away_stops_llama_server(llama_server, proxy_for) -> None:
    proxy = proxy_for(llama_server.url, "llama-server")
    body = {"messages": CHAT, "max_tokens": 1500, "stream": True, "ignore_eos": True}
    with httpx.Client(timeout=60) as c:
        with c.stream("POST", proxy.url + "/v1/chat/completions", json=body) as r:
            for i, _ in enumerate(r.iter_lines()):
                if i == 10:
                    break
    t0 = time.monotonic()
    while True:
        slots = httpx.get(llama_server.url + "/slots", timeout=5).json()
        if not any(s.get("is_processing") for s in slots):
            break
        assert time.monotonic() - t0 < 10, "llama-server kept generating"
        time.sleep(0.1)
    (rec,) = last(proxy)
    assert rec.state == "cancelled" and rec.metrics.output_tokens < 1500


# -- the Ollama emulator ---------------------------------------------------------------------
def test_ollama_client_through_the_proxy_to_the_emulator(ollama_emu, proxy_for) -> None:
    import ollama

    url, emu = ollama_emu
    proxy = proxy_for(url, "ollama")
    opts = {"temperature": 0, "num_predict": 16, "seed": 1}
    body = {"model": emu.model_name, "messages": CHAT, "options": opts}
    for stream in (True, False):
        out = assert_same_bytes(url, proxy.url, "/api/chat", {**body, "stream": stream})
        assert len(re.findall(rb'"done":\s*true', out)) == 1
    client = ollama.Client(host=proxy.url)
    parts = list(client.chat(model=emu.model_name, messages=CHAT, stream=True, options=opts))
    text = "".join(p.message.content or "" for p in parts)
    final = parts[-1]
    assert final.done and final.eval_count == 16
    whole = client.generate(model=emu.model_name, prompt="Hi", stream=False, options=opts)
    assert 0 < whole.eval_count <= 16
    recs = last(proxy, 4)  # (the direct requests are not the proxy's)
    chat, gen = recs[-2], recs[-1]
    assert chat.timeline.text == text and chat.metrics.output_tokens == 16
    assert chat.metrics.output_tokens_source == "usage" and chat.timeline.truth is not None
    assert chat.timeline.truth.source == "ollama durations"
    assert 0.5 < chat.metrics.decode_tps_vs_engine < 2.0
    assert gen.stream is False and gen.path == "/api/generate"
    assert gen.metrics.output_tokens == whole.eval_count and gen.timeline.text == whole.response


# -- vLLM ----------------------------------------------------------------------------------
@pytest.mark.vllm
def test_vllm_with_the_openai_sdk_bytes_and_its_own_account(vllm_server, proxy_for) -> None:
    import openai

    proxy = proxy_for(vllm_server.url, "vllm")
    base = {"model": "smollm2", "messages": CHAT, "max_tokens": 16, "temperature": 0}
    for stream in (True, False):
        assert_same_bytes(
            vllm_server.url, proxy.url, "/v1/chat/completions", {**base, "stream": stream}
        )
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-x")
    time.sleep(1.0)  # idle: the proxy reads vLLM's /metrics before the next one
    chunks = list(client.chat.completions.create(stream=True, **base))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    rec = last(proxy, 3)[-1]
    assert rec.timeline.text == text and rec.state == "done"
    m = rec.metrics
    assert rec.timeline.truth is not None, rec.truth_note
    assert m.output_tokens == 16 and m.output_tokens_source == "usage"  # vLLM's own count
    assert m.engine_prefill_ms is not None and 0 <= m.ttft_minus_engine_prefill_ms < 500
    assert 0.6 < m.decode_tps_vs_engine < 1.6, m.decode_tps_vs_engine
    # two at once: no account can be attributed, and the rows say why
    threads = [
        threading.Thread(target=lambda: list(client.chat.completions.create(stream=True, **base)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in last(proxy, 5)[-2:]:
        assert r.timeline.truth is None and r.truth_note == "other requests overlapped it"
        assert r.metrics.output_tokens_estimated  # no usage asked for, no account: chunks


# -- Prometheus and the fleet ----------------------------------------------------------------
def test_prometheus_scrapes_the_proxy_and_the_fleet_lists_it(
    llama_server, proxy_for, tmp_path, cli_env
) -> None:
    if ps.prometheus_binary() is None:
        pytest.skip("prometheus not installed (scripts/setup-e2e.sh)")
    proxy = proxy_for(llama_server.url, "llama-server")
    addr = proxy.url.removeprefix("http://")
    jobs = [
        ps.Job("proxy", [addr], metrics_path="/infertop/metrics"),
        ps.Job("engine", [llama_server.url.removeprefix("http://")]),
    ]
    prom = ps.start_prometheus(jobs, tmp_path / "prom")
    try:
        ps.wait_targets_up(prom.url, 2)
        body = {"messages": CHAT, "max_tokens": 24, "stream": True}

        def ask() -> None:
            with httpx.stream(
                "POST", proxy.url + "/v1/chat/completions", json=body, timeout=60
            ) as r:
                r.read()

        # rate() counts growth between two samples of a series: Prometheus must have
        # scraped the token counter once before the last requests grow it. (Three quick
        # requests between two scrapes once left it a single value, and the rate 0.)
        ask()
        ps.wait_until(prom.url, "infertop_proxy_output_tokens_total")
        ask()
        ask()
        ps.wait_until(
            prom.url, 'sum(infertop_proxy_requests_total{route="/v1/chat/completions"}) >= 3'
        )
        out = subprocess.run(
            [sys.executable, "-m", "tui", "fleet", "--prometheus", prom.url, "--window", "30",
             "--once", "--json"],
            capture_output=True, text=True, env=cli_env, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        rows = {r["url"]: r for r in json.loads(out.stdout)["endpoints"]}
        row = rows[proxy.url]
        assert row["kind"] == "proxy→llama-server" and row["up"]
        assert row["running"] == 0 and row["gen_tps"] > 0
        assert row["ttft_p50_ms"] > 0 and row["itl_p50_ms"] > 0 and row["itl_mean_ms"] > 0
        assert rows[llama_server.url]["kind"] == "llama-server"  # the engine's own row too
        # its busiest client (httpx, by its User-Agent), from the per-client series
        assert [c["client"] for c in row["top_clients"]][:1] in (["httpx"], ["other"])
        assert all(c["tokens"] >= 0 for c in row["top_clients"])
        q = ps.get_json(prom.url + "/api/v1/query?query=infertop_proxy_requests_total")
        assert sum(float(s["value"][1]) for s in q["data"]["result"]) >= 3
    finally:
        prom.stop()


def test_ollama_answers_not_streamed_leave_no_text_in_the_events_file(ollama_emu, tmp_path) -> None:
    """Issue 43: /api/generate with stream false put ``response`` (the answer) and
    ``thinking`` in the engine report, and so in --events. Now the report keeps Ollama's
    numbers only."""
    url, emu = ollama_emu
    events = tmp_path / "events.jsonl"
    t = ProxyThread(ProxyConfig(upstream=url, kind="ollama", listen_port=0, events_path=events))
    t.start()
    try:
        opts = {"temperature": 0, "num_predict": 8, "seed": 1}
        body = {"model": emu.model_name, "prompt": "Say a secret word.", "stream": False}
        answer = httpx.post(t.url + "/api/generate", json={**body, "options": opts}, timeout=120)
        text = answer.json()["response"]
        assert len(text) > 3
        deadline = time.monotonic() + 30
        while t.call(lambda: t.proxy.events.written) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        t.stop()
    (record,) = [json.loads(line) for line in events.read_text().splitlines()]
    raw = record["engine_truth"]["raw"]
    assert raw["eval_count"] > 0 and "response" not in raw and "context" not in raw
    assert text not in events.read_text()
