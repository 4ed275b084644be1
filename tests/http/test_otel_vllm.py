"""The engine's trace joined to infertop's: a real vLLM (CPU build) started with
``--otlp-traces-endpoint`` at the tests' Phoenix, behind ``infertop proxy
--trace-propagation``. vLLM continues the ``traceparent`` the proxy sends, so its
``llm_request`` span (queue, prefill, decode) lands in the proxy span's trace, as its
child."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support import real_servers as servers
from tests.support.phoenix_server import attributes
from tui.core.outcome import Outcomes
from tui.otel import conventions as C
from tui.proxy.server import ProxyConfig, ProxyThread

pytestmark = [pytest.mark.engine, pytest.mark.vllm]
pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs it")
from tui.otel.export import OtelExporter  # noqa: E402


@pytest.fixture
def traced_vllm(phoenix, server_logs) -> Iterator[servers.ServerProcess]:
    if os.environ.get("INFERTOP_SKIP_VLLM") == "1":
        servers.unavailable("vLLM", "INFERTOP_SKIP_VLLM=1")
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"  # vLLM's default: gRPC
    try:
        sp = servers.start_vllm_server(
            server_logs, extra_args=["--otlp-traces-endpoint", phoenix.url + "/v1/traces"]
        )
    except servers.ServerStartError as e:
        servers.unavailable("vLLM with --otlp-traces-endpoint", str(e))
    finally:
        os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", None)
    try:
        yield sp
    finally:
        sp.stop()


def test_vllms_span_lands_under_the_proxys(traced_vllm, phoenix) -> None:
    exporter = OtelExporter(phoenix.url, flush_s=0.2, metrics=False)
    outcomes = Outcomes()
    outcomes.add(exporter)
    config = ProxyConfig(upstream=traced_vllm.url, kind="vllm", trace="propagate", listen_port=0)
    proxy = ProxyThread(config, outcomes)
    proxy.start()
    try:
        body = {
            "model": "smollm2",
            "messages": [{"role": "user", "content": "Say hi."}],
            "max_tokens": 8,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        r = httpx.post(proxy.url + "/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 200
        deadline = time.monotonic() + 30  # (vLLM's own account is read first)
        while not proxy.call(lambda: len(proxy.proxy.book.recent)):
            assert time.monotonic() < deadline, "no record"
            time.sleep(0.05)
        rec = proxy.call(lambda: proxy.proxy.book.recent[-1])
        assert exporter.flush(20)
    finally:
        proxy.stop()
        exporter.close()
    (ours,) = phoenix.wait_spans(lambda s: s["context"]["span_id"] == rec.trace.span_id)
    assert attributes(ours)[C.GEN_AI_PROVIDER_NAME] == "vllm"
    (engine,) = phoenix.wait_spans(
        lambda s: s["name"] == "llm_request" and s["context"]["trace_id"] == rec.trace.trace_id,
        timeout_s=60,
    )
    assert engine["parent_id"] == rec.trace.span_id
    a = attributes(engine)
    assert a.get("gen_ai.usage.completion_tokens", a.get("gen_ai.usage.output_tokens")) == (
        rec.metrics.output_tokens
    )
