"""A differential test: the same requests seen by the official OpenTelemetry
instrumentation of the official ``openai`` client (``opentelemetry-instrumentation-
openai-v2``, on the client side, in Phoenix's venv) and by ``infertop proxy`` between that
client and a real llama-server, one streamed and one not. Both export to one Phoenix;
the client's span and the proxy's of each request agree on the model asked for and the
model that answered, the token counts
and the finish reasons (where the instrumentation records them: 2.4b0 records none for a
stream). The instrumentation sends no ``traceparent`` (it suppresses the HTTP client's
instrumentation), so the two are paired by their order; continuing a client's trace is
tests/proxy/test_tracing.py's."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.phoenix_server import attributes, phoenix_python
from tui.core.outcome import Outcomes
from tui.otel import conventions as C
from tui.proxy.server import ProxyConfig, ProxyThread

pytestmark = pytest.mark.engine
pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs it")
from tui.otel.export import OtelExporter  # noqa: E402

CLIENT = r"""
import json, sys
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

phoenix, proxy = sys.argv[1], sys.argv[2]
provider = TracerProvider(resource=Resource.create({"service.name": "openai-client"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=phoenix + "/v1/traces")))
trace.set_tracer_provider(provider)
OpenAIInstrumentor().instrument()
import openai

client = openai.OpenAI(base_url=proxy + "/v1", api_key="none", max_retries=0)
ask = dict(model="smollm2", messages=[{"role": "user", "content": "Name a fruit."}],
           max_tokens=10, temperature=0)
usage = {"include_usage": True}
streamed = client.chat.completions.create(stream=True, stream_options=usage, **ask)
for _ in streamed:
    pass
whole = client.chat.completions.create(**ask)
provider.force_flush()
print(json.dumps({"whole": [whole.usage.prompt_tokens, whole.usage.completion_tokens]}))
"""


@pytest.fixture
def proxy(llama_server, phoenix) -> Iterator[tuple[ProxyThread, OtelExporter]]:
    exporter = OtelExporter(phoenix.url, flush_s=0.2, metrics=False)
    outcomes = Outcomes()
    outcomes.add(exporter)
    config = ProxyConfig(
        upstream=llama_server.url, kind="llama-server", trace="record", listen_port=0
    )
    t = ProxyThread(config, outcomes)
    t.start()
    yield t, exporter
    t.stop()
    exporter.close()


def test_the_official_instrumentation_and_the_proxy_agree(proxy, phoenix, tmp_path) -> None:
    t, exporter = proxy
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    run = subprocess.run(
        [str(phoenix_python()), str(script), phoenix.url, t.url],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.splitlines()[-1])["whole"][1] > 0
    assert exporter.flush(20)

    def is_client(s) -> bool:
        a = attributes(s)
        return a.get(C.GEN_AI_OPERATION_NAME) == "chat" and C.INFERTOP_SOURCE not in a

    clients = phoenix.wait_spans(is_client, n=2)
    mine = {r.id for r in t.call(lambda: list(t.proxy.book.recent))}  # (Phoenix is shared)
    ours = phoenix.wait_spans(lambda s: attributes(s).get(C.INFERTOP_REQUEST_ID) in mine, n=2)
    pairs = list(zip(sorted(clients, key=_start), sorted(ours, key=_start)))
    assert [attributes(b)[C.GEN_AI_REQUEST_STREAM] for _, b in pairs] == [True, False]
    compared_finish = 0
    for client, mine in pairs:
        a, b = attributes(client), attributes(mine)
        for key in (
            C.GEN_AI_REQUEST_MODEL,
            C.GEN_AI_RESPONSE_MODEL,
            C.GEN_AI_USAGE_INPUT_TOKENS,
            C.GEN_AI_USAGE_OUTPUT_TOKENS,
        ):
            assert a[key] == b[key], (key, a, b)
        if C.GEN_AI_RESPONSE_FINISH_REASONS in a:
            assert a[C.GEN_AI_RESPONSE_FINISH_REASONS] == b[C.GEN_AI_RESPONSE_FINISH_REASONS]
            compared_finish += 1
    assert compared_finish >= 1


def _start(span) -> str:
    return str(span["start_time"])
