"""OpenTelemetry export against real servers and a real receiver: requests through
``infertop proxy`` to a real llama-server (chat, Responses, Messages) and ``infertop
run``'s own request land in Arize Phoenix (started by the tests on loopback) as GenAI
spans; read back through Phoenix's REST API, each says the model (asked for, and the one
the server's answer named), the operation, the server's own token counts,
``time_to_first_chunk`` equal to the proxy's TTFT (the same stamps), the stream flag, the
finish reasons and the server's address. Metrics go to an
OTLP receiver decoding ExportMetricsServiceRequest, scraped by a real Prometheus: the
duration histogram with the advised bounds and a count equal to the requests sent."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support import thinking_servers as ts
from tests.support.otlp_sink import OtlpSink
from tests.support.phoenix_server import attributes
from tui.core.outcome import Outcomes
from tui.otel import conventions as C
from tui.proxy.server import ProxyConfig, ProxyThread

pytestmark = pytest.mark.engine
pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs it")
from tui.otel.export import OtelExporter  # noqa: E402

QUESTION = [{"role": "user", "content": "Name three colours."}]
BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "model": "smollm2",
        "messages": QUESTION,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 12,
        "temperature": 0,
    },
    "/v1/responses": {
        "model": "smollm2",
        "input": "Name three colours.",
        "stream": True,
        "max_output_tokens": 12,
        "temperature": 0,
    },
    "/v1/messages": {
        "model": "smollm2",
        "messages": QUESTION,
        "stream": True,
        "max_tokens": 12,
        "temperature": 0,
    },
}


def server_usage(path: str, raw: bytes) -> tuple[int, int, str, int | None]:
    """(input tokens, output tokens, finish reason, cached input tokens) as the server's
    stream said them; Anthropic's input is its ``input_tokens`` (computed now) plus the
    cache's (the conventions' input tokens include the cached ones)."""
    objs = [d for _, d in ts.sse_events(raw) if isinstance(d, dict)]
    if path == "/v1/chat/completions":
        usage = [o["usage"] for o in objs if o.get("usage")][-1]
        finish = [
            c["finish_reason"] for o in objs for c in o.get("choices", []) if c.get("finish_reason")
        ]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return usage["prompt_tokens"], usage["completion_tokens"], finish[-1], cached
    if path == "/v1/responses":
        (done,) = [o for o in objs if o.get("type") == "response.completed"]
        u = done["response"]["usage"]
        cached = (u.get("input_tokens_details") or {}).get("cached_tokens")
        return u["input_tokens"], u["output_tokens"], done["response"]["status"], cached
    start = [o for o in objs if o.get("type") == "message_start"][0]["message"]["usage"]
    delta = [o for o in objs if o.get("type") == "message_delta"][-1]
    usage = start | delta["usage"]
    read = usage.get("cache_read_input_tokens")
    prompt = usage["input_tokens"] + (read or 0) + (usage.get("cache_creation_input_tokens") or 0)
    return prompt, usage["output_tokens"], delta["delta"]["stop_reason"], read


@pytest.fixture
def exporting_proxy(llama_server, phoenix) -> Iterator[tuple[ProxyThread, OtelExporter]]:
    exporter = OtelExporter(phoenix.url, flush_s=0.2, metric_interval_s=60)
    outcomes = Outcomes()
    outcomes.add(exporter)
    t = ProxyThread(
        ProxyConfig(upstream=llama_server.url, kind="llama-server", trace="record", listen_port=0),
        outcomes,
    )
    t.start()
    yield t, exporter
    t.stop()
    exporter.close()


def test_proxied_requests_land_in_phoenix_as_genai_spans(
    llama_server, phoenix, exporting_proxy
) -> None:
    proxy, exporter = exporting_proxy
    said = {}
    for path, body in BODIES.items():
        r = httpx.post(proxy.url + path, json=body, timeout=60)
        assert r.status_code == 200, r.text[:300]
        said[path] = server_usage(path, r.content)
    deadline = time.monotonic() + 30
    while proxy.call(lambda: len(proxy.proxy.book.recent)) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    recs = proxy.call(lambda: list(proxy.proxy.book.recent))[-3:]
    assert exporter.flush(20)
    ids = {rec.trace.span_id: rec for rec in recs}
    spans = phoenix.wait_spans(lambda s: s["context"]["span_id"] in ids, n=3)
    host = urlsplit(llama_server.url)
    for span in spans:
        rec = ids[span["context"]["span_id"]]
        a = attributes(span)
        prompt, output, finish, cached = said[rec.path]
        assert span["name"] == "chat smollm2" and span["context"]["trace_id"] == rec.trace.trace_id
        assert a[C.GEN_AI_OPERATION_NAME] == "chat" and a[C.GEN_AI_PROVIDER_NAME] == "llama.cpp"
        assert a[C.GEN_AI_REQUEST_MODEL] == "smollm2" and a[C.GEN_AI_REQUEST_STREAM] is True
        assert a[C.GEN_AI_RESPONSE_MODEL] == rec.response_model and rec.response_model
        assert a[C.GEN_AI_USAGE_INPUT_TOKENS] == prompt, rec.path
        assert a[C.GEN_AI_USAGE_OUTPUT_TOKENS] == output, rec.path
        assert a.get(C.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS) == cached, rec.path
        # the same stamps as the proxy's own TTFT
        assert a[C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == pytest.approx(
            rec.metrics.ttft_ms / 1000, abs=1e-9
        )
        assert a[C.GEN_AI_RESPONSE_FINISH_REASONS] == [rec.metrics.finish_reason]
        assert rec.metrics.finish_reason in (finish, "stop", "length", "max_tokens")
        assert (a[C.SERVER_ADDRESS], a[C.SERVER_PORT]) == (host.hostname, host.port)
        assert a[C.INFERTOP_ROUTE] == rec.path and a[C.INFERTOP_SOURCE] == "proxy"
        # the span is the request's own time: forwarded → answer's end
        e2e_ms = rec.metrics.e2e_ms
        start, end = (_epoch_ns(span[k]) for k in ("start_time", "end_time"))
        assert (end - start) / 1e6 == pytest.approx(e2e_ms, abs=0.01)
        assert abs(start / 1e9 - rec.wall) < 5


def _epoch_ns(iso: str) -> int:
    from datetime import datetime

    dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return int(dt.timestamp()) * 10**9 + dt.microsecond * 1000


def answered_model(url: str, asked: str) -> str:
    """The ``model`` field llama-server writes in its streamed answer to a request that
    asks for ``asked``, read from the server's own bytes. (llama-server 11434 names its
    own model, the GGUF's path, whatever was asked; a server that echoed the name asked
    for would be read as it answered, too.)"""
    body = {**BODIES["/v1/chat/completions"], "model": asked}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text[:300]
    named = {d["model"] for _, d in ts.sse_events(r.content) if isinstance(d, dict)}
    assert len(named) == 1, named
    return named.pop()


def test_infertop_runs_own_request_lands_in_phoenix(llama_server, phoenix, cli_env) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "run", "--url", llama_server.url, "--prompt",
         "Say hello.", "--max-tokens", "8", "--otlp", phoenix.url, "--json",
         "--model", "asked-for"],
        capture_output=True, text=True, env=cli_env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    trace_id = out["trace_id"]
    assert trace_id and len(trace_id) == 32
    (span,) = phoenix.wait_spans(lambda s: s["context"]["trace_id"] == trace_id)
    a = attributes(span)
    assert a[C.INFERTOP_SOURCE] == "run" and a[C.GEN_AI_OPERATION_NAME] == "chat"
    assert a[C.GEN_AI_USAGE_INPUT_TOKENS] == out["prompt_tokens"]
    assert a[C.GEN_AI_USAGE_OUTPUT_TOKENS] == out["output_tokens"]
    assert out["output_tokens_source"] == "usage"
    assert a[C.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == pytest.approx(
        out["ttft_ms"] / 1000, abs=1e-9
    )
    assert a[C.GEN_AI_RESPONSE_FINISH_REASONS] == [out["finish_reason"]]
    assert a[C.SERVER_PORT] == urlsplit(llama_server.url).port
    assert C.GEN_AI_INPUT_MESSAGES not in a  # no text unless asked for
    # the model asked for, and the one the server's answer named, as llama-server wrote it
    assert a[C.GEN_AI_REQUEST_MODEL] == out["model"] == "asked-for"
    answered = answered_model(llama_server.url, "asked-for")
    assert a[C.GEN_AI_RESPONSE_MODEL] == out["response_model"] == answered


def test_metrics_reach_a_real_prometheus(llama_server, tmp_path) -> None:
    from tests.support.prometheus_server import (
        Job,
        query,
        require_binaries,
        start_prometheus,
        wait_until,
    )

    require_binaries(node_exporter=False)
    sink = OtlpSink()
    exporter = OtelExporter(sink.url, flush_s=0.2, metric_interval_s=0.5)
    outcomes = Outcomes()
    outcomes.add(exporter)
    proxy = ProxyThread(
        ProxyConfig(upstream=llama_server.url, kind="llama-server", listen_port=0), outcomes
    )
    proxy.start()
    prom = start_prometheus([Job("otlp", [sink.url[7:]])], tmp_path / "prom", interval="1s")
    try:
        sent = 4
        for _ in range(sent):
            r = httpx.post(
                proxy.url + "/v1/chat/completions", json=BODIES["/v1/chat/completions"], timeout=60
            )
            assert r.status_code == 200
        name = "gen_ai_client_operation_duration_seconds"
        result = wait_until(prom.url, f"sum({name}_count) == {sent}", timeout_s=60)
        assert float(result[0]["value"][1]) == sent
        buckets = query(prom.url, f"{name}_bucket")
        bounds = sorted(float(b["metric"]["le"]) for b in buckets if b["metric"]["le"] != "+Inf")
        assert tuple(bounds) == C.DURATION_BUCKETS
        labels = buckets[0]["metric"]
        assert (
            labels["gen_ai_operation_name"] == "chat"
            and labels["gen_ai_request_model"] == "smollm2"
        )
        usage = query(prom.url, "sum by (gen_ai_token_type) (gen_ai_client_token_usage_count)")
        assert {u["metric"]["gen_ai_token_type"]: float(u["value"][1]) for u in usage} == {
            "input": sent,
            "output": sent,
        }
    finally:
        prom.stop()
        proxy.stop()
        exporter.close()
        sink.stop()
