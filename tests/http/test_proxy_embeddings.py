"""Embeddings and reranking through ``infertop proxy``: answers that are never streamed,
each a row with its latency and prompt tokens (no TTFT: "n/s"), counted in /metrics under
its route. Real: llama-server on SmolLM2 with ``--embeddings --pooling mean``, and with
``--reranking`` (the scores of a chat model mean nothing; the server's work and counts are
real)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support import real_servers
from tui.proxy.columns import ttft_text
from tui.proxy.server import ProxyConfig, ProxyThread

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def embedding_server(smollm2_gguf, server_logs) -> Iterator[real_servers.ServerProcess]:
    args = ["--embeddings", "--pooling", "mean"]
    with real_servers.running_llama_server(
        smollm2_gguf, server_logs, args, "llama-server (embeddings)"
    ) as sp:
        yield sp


@pytest.fixture(scope="module")
def rerank_server(smollm2_gguf, server_logs) -> Iterator[real_servers.ServerProcess]:
    with real_servers.running_llama_server(
        smollm2_gguf, server_logs, ["--reranking"], "llama-server (rerank)"
    ) as sp:
        yield sp


def proxied(upstream: str, path: str, body: dict) -> tuple[dict, object, str]:
    t = ProxyThread(ProxyConfig(upstream=upstream, kind="llama-server"))
    t.start()
    try:
        answer = httpx.post(t.url + path, json=body, timeout=60).json()
        deadline = time.monotonic() + 30
        while t.call(lambda: len(t.proxy.book.recent)) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (rec,) = t.call(lambda: list(t.proxy.book.recent))
        metrics = httpx.get(t.url + "/infertop/metrics", timeout=10).text
    finally:
        t.stop()
    return answer, rec, metrics


@pytest.mark.parametrize(
    ("server", "path", "body"),
    [
        ("embedding_server", "/v1/embeddings", {"input": "hello world", "model": "m"}),
        (
            "rerank_server",
            "/v1/rerank",
            {"query": "hello", "documents": ["hi there", "goodbye"], "model": "m"},
        ),
    ],
)
def test_a_row_with_latency_and_prompt_tokens(request, server, path, body) -> None:
    sp = request.getfixturevalue(server)
    answer, rec, metrics = proxied(sp.url, path, body)
    up = sp.url.removeprefix("http://")
    assert answer["usage"]["prompt_tokens"] > 0
    m = rec.metrics
    assert rec.state == "done" and rec.stream is False
    assert rec.dialect in ("embeddings", "rerank")
    assert m.prompt_tokens == answer["usage"]["prompt_tokens"]
    assert (m.output_tokens, m.output_tokens_source) == (0, "usage")
    assert m.e2e_ms is not None and m.e2e_ms > 0
    row = rec.row()
    assert ttft_text(row) == "n/s" and row.e2e_ms == m.e2e_ms
    labels = f'{{upstream="{up}",model="m",route="{path}"}}'
    assert f"infertop_proxy_requests_total{labels} 1" in metrics
    assert f"infertop_proxy_prompt_tokens_total{labels} {m.prompt_tokens}" in metrics
