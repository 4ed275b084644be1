"""What agents send, through ``infertop proxy``, measured: the OpenAI chat API with
tools, the Responses API (Codex CLI, the Agents SDK) and Anthropic's Messages API (Claude
Code), against the real llama-server made to reason and call tools with SmolLM2
(tests/support/thinking_servers.py), with the official ``openai`` and ``anthropic`` SDKs.

For each: the bytes through the proxy are the server's (ids, times and timings masked),
and the proxy's row of the request shows TTFT, TTFO after it, reasoning and answer tokens,
and an output count equal to the server's own usage — a Responses stream's repeats
(``*.done``, ``response.completed``'s output) counted once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.support import thinking_bodies as tb
from tests.support import thinking_servers as ts
from tests.support.same_bytes import exchange, masked
from tui.core.events import REASONING, TOOL
from tui.proxy.record import ProxiedRequest
from tui.proxy.server import ProxyConfig, ProxyThread

pytestmark = pytest.mark.engine


@pytest.fixture
def proxy(thinking_llama_server) -> Iterator[ProxyThread]:
    t = ProxyThread(ProxyConfig(upstream=thinking_llama_server.url, kind="llama-server"))
    t.start()
    yield t
    t.stop()


def records(proxy: ProxyThread, n: int) -> list[ProxiedRequest]:
    """The proxy's last ``n`` finished requests, oldest first (waits for them)."""
    deadline = time.monotonic() + 30
    while proxy.call(lambda: len(proxy.proxy.book.recent)) < n:
        assert time.monotonic() < deadline, "no record"
        time.sleep(0.05)
    recs: list[ProxiedRequest] = proxy.call(lambda: list(proxy.proxy.book.recent))
    return recs[-n:]


def sse_objects(raw: bytes) -> list[dict[str, Any]]:
    return [d for _, d in ts.sse_events(raw) if isinstance(d, dict)]


def chat_output_tokens(raw: bytes) -> int:
    return int([o["usage"] for o in sse_objects(raw) if o.get("usage")][-1]["completion_tokens"])


def responses_output_tokens(raw: bytes) -> int:
    (done,) = [o for o in sse_objects(raw) if o.get("type") == "response.completed"]
    return int(done["response"]["usage"]["output_tokens"])


def messages_output_tokens(raw: bytes) -> int:
    deltas = [o for o in sse_objects(raw) if o.get("type") == "message_delta"]
    return int(deltas[-1]["usage"]["output_tokens"])


CASES: list[tuple[str, str, Callable[[], dict[str, Any]], Callable[[bytes], int], str]] = [
    ("chat", "/v1/chat/completions", tb.reasoning_chat_body, chat_output_tokens, "answer"),
    ("chat-tool", "/v1/chat/completions", tb.tool_chat_body, chat_output_tokens, "tool"),
    ("responses", "/v1/responses", tb.reasoning_responses_body, responses_output_tokens, "answer"),
    ("responses-tool", "/v1/responses", tb.tool_responses_body, responses_output_tokens, "tool"),
    ("messages", "/v1/messages", tb.reasoning_messages_body, messages_output_tokens, "answer"),
    ("messages-tool", "/v1/messages", tb.tool_messages_body, messages_output_tokens, "tool"),
]


@pytest.mark.parametrize(
    ("path", "body", "count", "ends_in"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_agent_traffic_passes_unchanged_and_is_measured(
    thinking_llama_server, proxy, path, body, count, ends_in
) -> None:
    direct_url = thinking_llama_server.url
    exchange(direct_url, path, body())  # warm-up: the prompt cached, as for the two below
    direct = exchange(direct_url, path, body())
    through = exchange(proxy.url, path, body())
    assert through[0] == direct[0] == 200
    assert through[1] == direct[1]
    assert masked(through[2]) == masked(direct[2])

    (rec,) = records(proxy, 1)
    m = rec.metrics
    assert rec.state == "done" and m is not None, rec.timeline.error
    assert rec.dialect in ("openai-chat", "openai-responses", "anthropic")
    # the server's own count, once (a Responses stream repeats its text three times over)
    assert m.output_tokens == count(through[2]) and m.output_tokens_source == "usage"
    assert m.ttft_ms is not None and m.ttfo_ms is not None and m.ttfo_ms > m.ttft_ms
    assert m.thinking_ms is not None and m.thinking_ms > 0
    assert m.reasoning_tokens and m.answer_tokens
    assert m.reasoning_tokens + m.answer_tokens == m.output_tokens
    parts = set(rec.timeline.parts)
    assert REASONING in parts and (TOOL in parts) == (ends_in == "tool")
    row = rec.row()
    assert (row.ttft_ms, row.ttfo_ms, row.reasoning_tokens) == (
        m.ttft_ms,
        m.ttfo_ms,
        m.reasoning_tokens,
    )
    metrics = httpx.get(proxy.url + "/infertop/metrics", timeout=10).text
    assert f'route="{path}"' in metrics and "infertop_proxy_ttfo_seconds_count" in metrics


def test_openai_sdk_chat_with_tools_through_the_proxy(proxy) -> None:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused")
    name, arguments, usage = "", "", None
    for chunk in client.chat.completions.create(**tb.tool_chat_body()):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                name += (call.function and call.function.name) or ""
                arguments += (call.function and call.function.arguments) or ""
    assert name == tb.TOOL_NAME and json.loads(arguments)["city"]
    (rec,) = records(proxy, 1)
    assert rec.metrics is not None and usage is not None
    assert rec.metrics.output_tokens == usage.completion_tokens
    assert rec.timeline.text == f"{name}({arguments})"


def test_openai_sdk_responses_stream_through_the_proxy(proxy) -> None:
    """responses.create(stream=True): the SDK's responses.stream() needs output_index on
    every event, which llama-server does not send (tests/http/test_thinking_server.py)."""
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused")
    body = tb.reasoning_responses_body()
    extra = {k: body.pop(k) for k in ("thinking_budget_tokens", "seed")}
    events = list(client.responses.create(**body, extra_body=extra))
    final = events[-1]
    assert final.type == "response.completed" and final.response.usage is not None
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    (rec,) = records(proxy, 1)
    assert rec.metrics is not None
    assert rec.metrics.output_tokens == final.response.usage.output_tokens
    assert rec.timeline.text == text  # once, not once per repeat


def test_anthropic_sdk_messages_stream_through_the_proxy(proxy) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="unused")
    body = tb.reasoning_messages_body()
    with client.messages.stream(**tb.sdk_stream_args(body)) as stream:
        message = stream.get_final_message()
    thinking = "".join(b.thinking for b in message.content if b.type == "thinking")
    text = "".join(b.text for b in message.content if b.type == "text")
    (rec,) = records(proxy, 1)
    assert rec.metrics is not None
    assert rec.metrics.output_tokens == message.usage.output_tokens
    assert rec.timeline.reasoning_text == thinking and rec.timeline.text == text


# -- vLLM's CPU build, its qwen3 reasoning parser and hermes tool parser ---------------------

VLLM_CASES: list[tuple[str, str, Callable[..., dict[str, Any]], Callable[[bytes], int], str]] = [
    ("chat", "/v1/chat/completions", tb.reasoning_example_chat_body, chat_output_tokens, "answer"),
    ("chat-tool", "/v1/chat/completions", tb.tool_chat_body, chat_output_tokens, "tool"),
    (
        "responses",
        "/v1/responses",
        tb.reasoning_example_responses_body,
        responses_output_tokens,
        "answer",
    ),
    ("messages-tool", "/v1/messages", tb.tool_messages_body, messages_output_tokens, "tool"),
]


@pytest.fixture
def vllm_proxy(thinking_vllm_server) -> Iterator[ProxyThread]:
    t = ProxyThread(ProxyConfig(upstream=thinking_vllm_server.url, kind="vllm"))
    t.start()
    yield t
    t.stop()


@pytest.mark.vllm
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("path", "body", "count", "ends_in"),
    [c[1:] for c in VLLM_CASES],
    ids=[c[0] for c in VLLM_CASES],
)
def test_vllm_agent_traffic_passes_unchanged_and_is_measured(
    thinking_vllm_server, vllm_proxy, path, body, count, ends_in
) -> None:
    request_body = body(model=tb.VLLM_MODEL)
    exchange(thinking_vllm_server.url, path, request_body)  # warm-up: the prefix cached
    direct = exchange(thinking_vllm_server.url, path, request_body)
    through = exchange(vllm_proxy.url, path, request_body)
    assert through[0] == direct[0] == 200
    assert masked(through[2]) == masked(direct[2])
    (rec,) = records(vllm_proxy, 1)
    m = rec.metrics
    assert rec.state == "done" and m is not None, rec.timeline.error
    assert m.output_tokens == count(through[2]) and m.output_tokens_source == "usage"
    assert m.ttfo_ms is not None and m.ttft_ms is not None and m.ttfo_ms > m.ttft_ms
    assert m.reasoning_tokens and m.answer_tokens is not None
    assert m.reasoning_tokens + m.answer_tokens == m.output_tokens
    if path != "/v1/messages":  # vLLM counts reasoning itself in these two APIs
        assert m.reasoning_tokens_source == "usage"
    assert (TOOL in rec.timeline.parts) == (ends_in == "tool")


@pytest.mark.vllm
@pytest.mark.timeout(900)
def test_openai_sdk_responses_stream_through_the_proxy_to_vllm(vllm_proxy) -> None:
    """The SDK's responses.stream() (it needs vLLM's output_index on every event)."""
    client = openai.OpenAI(base_url=vllm_proxy.url + "/v1", api_key="unused")
    body = tb.reasoning_example_responses_body(model=tb.VLLM_MODEL)
    del body["stream"]
    extra = {"seed": body.pop("seed")}
    with client.responses.stream(**body, extra_body=extra) as stream:
        final = stream.get_final_response()
    assert final.usage is not None
    (rec,) = records(vllm_proxy, 1)
    m = rec.metrics
    assert m is not None and m.output_tokens == final.usage.output_tokens
    assert m.reasoning_tokens == final.usage.output_tokens_details.reasoning_tokens
    assert rec.timeline.text == final.output_text
