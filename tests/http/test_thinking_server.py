"""The real servers really reason and call tools with SmolLM2 (the streams the decoders are
tested against): llama-server on the raw bytes of each wire format it serves and through
the official openai and anthropic SDKs; vLLM (``-m vllm``, one more ~60 s start) through
its qwen3 reasoning and hermes tool parsers."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from tests.support import thinking_bodies as tb
from tests.support import thinking_servers as ts

pytestmark = pytest.mark.engine


def chat_deltas(events: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [d["choices"][0]["delta"] for _, d in events if isinstance(d, dict) and d["choices"]]


def first(items: list[Any], pred: Any) -> int:
    """Index of the first item matching ``pred`` (len(items) when none does)."""
    return next((i for i, x in enumerate(items) if pred(x)), len(items))


def chat(url: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    events = ts.sse_events(ts.post_raw(url + "/v1/chat/completions", body))
    assert events[-1] == ("", "[DONE]")
    return events[:-1]


def usage_of(events: list[tuple[str, Any]]) -> dict[str, Any]:
    (usage,) = [d["usage"] for _, d in events if d.get("usage")]
    assert isinstance(usage, dict)
    return usage


def test_chat_reasoning_deltas_come_before_the_answer(thinking_llama_server) -> None:
    events = chat(thinking_llama_server.url, tb.reasoning_chat_body())
    deltas = chat_deltas(events)
    reasoning = [d["reasoning_content"] for d in deltas if d.get("reasoning_content")]
    answer = [d["content"] for d in deltas if d.get("content")]
    assert reasoning and answer
    first_reasoning = first(deltas, lambda d: d.get("reasoning_content"))
    first_answer = first(deltas, lambda d: d.get("content"))
    assert first_reasoning < first_answer
    assert not any(d.get("reasoning_content") for d in deltas[first_answer:])
    # the budget cut the reasoning: at most REASONING_BUDGET tokens, one per delta
    assert len(reasoning) <= tb.REASONING_BUDGET
    assert "<think>" not in "".join(answer) and "</think>" not in "".join(answer)
    usage = usage_of(events)
    assert usage["completion_tokens"] >= len(reasoning) + len(answer)
    assert usage["prompt_tokens"] > 0


def test_unparsed_reasoning_shows_the_think_tags(thinking_llama_server) -> None:
    """reasoning_format none: the same output, tags and all, in content (DeepSeek-R1 style)."""
    events = chat(thinking_llama_server.url, tb.reasoning_chat_body(reasoning_format="none"))
    deltas = chat_deltas(events)
    assert not any(d.get("reasoning_content") for d in deltas)
    text = "".join(d.get("content") or "" for d in deltas)
    assert text.startswith("<think>\n") and "</think>" in text


def test_chat_streams_reasoning_then_a_tool_call(thinking_llama_server) -> None:
    events = chat(thinking_llama_server.url, tb.tool_chat_body())
    deltas = chat_deltas(events)
    first_call = first(deltas, lambda d: d.get("tool_calls"))
    assert first_call < len(deltas)
    assert any(d.get("reasoning_content") for d in deltas[:first_call])
    assert not any(d.get("content") for d in deltas)
    calls = [c for d in deltas for c in d.get("tool_calls") or []]
    assert calls[0]["function"]["name"] == tb.TOOL_NAME and calls[0]["id"]
    assert {c["index"] for c in calls} == {0}
    arguments = json.loads("".join(c["function"].get("arguments", "") for c in calls))
    assert isinstance(arguments["city"], str)
    finish = [d["choices"][0]["finish_reason"] for _, d in events if d["choices"]]
    assert finish[-1] == "tool_calls"
    assert usage_of(events)["completion_tokens"] > len(calls)


def test_same_request_same_text(thinking_llama_server) -> None:
    """Temperature 0 on one slot: the captures' text is reproducible."""

    def text() -> list[tuple[str, str]]:
        deltas = chat_deltas(chat(thinking_llama_server.url, tb.reasoning_chat_body()))
        return [(k, v) for d in deltas for k, v in d.items() if k != "role" and v]

    assert text() == text()


def test_responses_api_streams_reasoning_then_text(thinking_llama_server) -> None:
    raw = ts.post_raw(thinking_llama_server.url + "/v1/responses", tb.reasoning_responses_body())
    events = ts.sse_events(raw)
    names = [name for name, _ in events]
    assert all(name == d["type"] for name, d in events)
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert "response.reasoning_text.delta" in names and "response.output_text.delta" in names
    assert names.index("response.reasoning_text.delta") < names.index("response.output_text.delta")
    usage = events[-1][1]["response"]["usage"]
    assert usage["output_tokens"] > 0 and usage["input_tokens"] > 0


def test_responses_api_streams_a_function_call(thinking_llama_server) -> None:
    raw = ts.post_raw(thinking_llama_server.url + "/v1/responses", tb.tool_responses_body())
    events = ts.sse_events(raw)
    added = [d["item"] for name, d in events if name == "response.output_item.added"]
    calls = [item for item in added if item["type"] == "function_call"]
    assert [c["name"] for c in calls] == [tb.TOOL_NAME]
    args = [d["delta"] for name, d in events if name == "response.function_call_arguments.delta"]
    assert isinstance(json.loads("".join(args))["city"], str)
    names = [name for name, _ in events]
    assert names.index("response.reasoning_text.delta") < names.index(
        "response.function_call_arguments.delta"
    )


def test_anthropic_messages_stream_thinking_then_text(thinking_llama_server) -> None:
    raw = ts.post_raw(thinking_llama_server.url + "/v1/messages", tb.reasoning_messages_body())
    events = ts.sse_events(raw)
    kinds = [d["delta"]["type"] for name, d in events if name == "content_block_delta"]
    assert "thinking_delta" in kinds and "text_delta" in kinds
    assert kinds.index("thinking_delta") < kinds.index("text_delta")
    assert len([k for k in kinds if k == "thinking_delta"]) <= tb.REASONING_BUDGET
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    (delta,) = [d for name, d in events if name == "message_delta"]
    assert delta["usage"]["output_tokens"] > 0 and delta["delta"]["stop_reason"] == "end_turn"


def test_anthropic_messages_stream_a_tool_use(thinking_llama_server) -> None:
    raw = ts.post_raw(thinking_llama_server.url + "/v1/messages", tb.tool_messages_body())
    events = ts.sse_events(raw)
    blocks = [d["content_block"] for name, d in events if name == "content_block_start"]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"]
    assert blocks[1]["name"] == tb.TOOL_NAME
    partial = [
        d["delta"]["partial_json"]
        for name, d in events
        if name == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    ]
    assert isinstance(json.loads("".join(partial))["city"], str)
    (delta,) = [d for name, d in events if name == "message_delta"]
    assert delta["delta"]["stop_reason"] == "tool_use"


# -- the official SDKs against the same server ---------------------------------------------


def test_openai_sdk_chat_stream_with_tools(thinking_llama_server) -> None:
    client = openai.OpenAI(base_url=thinking_llama_server.url + "/v1", api_key="unused")
    body = tb.tool_chat_body()
    stream = client.chat.completions.create(**body)
    reasoning, name, arguments, finish = "", "", "", None
    for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
            for call in choice.delta.tool_calls or []:
                assert call.index == 0 and call.function is not None
                name += call.function.name or ""
                arguments += call.function.arguments or ""
    assert reasoning and name == tb.TOOL_NAME and finish == "tool_calls"
    assert isinstance(json.loads(arguments)["city"], str)


def test_openai_sdk_responses_event_stream(thinking_llama_server) -> None:
    """responses.create(stream=True) parses llama-server's events. (responses.stream()
    cannot: its accumulator needs output_index and content_index, which llama-server does
    not send — RuntimeError 'Duplicate response output index None.' on the second item.)"""
    client = openai.OpenAI(base_url=thinking_llama_server.url + "/v1", api_key="unused")
    body = tb.reasoning_responses_body()
    extra = {k: body.pop(k) for k in ("thinking_budget_tokens", "seed")}
    events = list(client.responses.create(**body, extra_body=extra))
    kinds = [e.type for e in events]
    assert kinds.index("response.reasoning_text.delta") < kinds.index("response.output_text.delta")
    final = events[-1]
    assert final.type == "response.completed" and final.response.usage is not None
    assert final.response.usage.output_tokens > 0
    assert [o.type for o in final.response.output] == ["reasoning", "message"]


def test_anthropic_sdk_messages_stream(thinking_llama_server) -> None:
    client = anthropic.Anthropic(base_url=thinking_llama_server.url, api_key="unused")
    body = tb.reasoning_messages_body()
    with client.messages.stream(**tb.sdk_stream_args(body)) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert kinds.index("thinking") < kinds.index("text")
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.usage.output_tokens > 0

    body = tb.tool_messages_body()
    with client.messages.stream(**tb.sdk_stream_args(body)) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    (tool_use,) = [b for b in message.content if b.type == "tool_use"]
    assert tool_use.name == tb.TOOL_NAME and isinstance(tool_use.input["city"], str)


# -- vLLM's CPU build: its qwen3 reasoning parser and hermes tool parser --------------------


@pytest.mark.vllm
@pytest.mark.timeout(900)
def test_vllm_chat_reasoning_then_answer(thinking_vllm_server) -> None:
    events = chat(thinking_vllm_server.url, tb.reasoning_example_chat_body(model=tb.VLLM_MODEL))
    deltas = chat_deltas(events)
    # vLLM names the field "reasoning" (llama-server: "reasoning_content")
    assert not any("reasoning_content" in d for d in deltas)
    first_answer = first(deltas, lambda d: (d.get("content") or "").strip())
    assert 0 < first_answer < len(deltas)
    assert any(d.get("reasoning") for d in deltas[:first_answer])
    assert not any(d.get("reasoning") for d in deltas[first_answer:])
    usage = usage_of(events)
    reasoning_tokens = usage["completion_tokens_details"]["reasoning_tokens"]
    assert 0 < reasoning_tokens < usage["completion_tokens"]


@pytest.mark.vllm
@pytest.mark.timeout(900)
def test_vllm_chat_reasoning_then_a_tool_call(thinking_vllm_server) -> None:
    events = chat(thinking_vllm_server.url, tb.tool_chat_body(model=tb.VLLM_MODEL))
    deltas = chat_deltas(events)
    first_call = first(deltas, lambda d: d.get("tool_calls"))
    assert first_call < len(deltas)
    assert any(d.get("reasoning") for d in deltas[:first_call])
    calls = [c for d in deltas for c in d.get("tool_calls") or []]
    assert calls[0]["function"]["name"] == tb.TOOL_NAME
    arguments = json.loads("".join(c["function"].get("arguments", "") for c in calls))
    assert isinstance(arguments["city"], str)
    assert usage_of(events)["completion_tokens_details"]["reasoning_tokens"] > 0


@pytest.mark.vllm
@pytest.mark.timeout(900)
def test_vllm_responses_stream_through_the_openai_sdk(thinking_vllm_server) -> None:
    """vLLM sends output_index and sequence_number: responses.stream() works here."""
    client = openai.OpenAI(base_url=thinking_vllm_server.url + "/v1", api_key="unused")
    body = tb.reasoning_example_responses_body(model=tb.VLLM_MODEL)
    del body["stream"]
    extra = {"seed": body.pop("seed")}  # not a parameter of the SDK's Responses
    with client.responses.stream(**body, extra_body=extra) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds.index("response.reasoning_text.delta") < kinds.index("response.output_text.delta")
    assert [o.type for o in final.output] == ["reasoning", "message"]
    assert final.usage is not None and final.usage.output_tokens_details.reasoning_tokens > 0


@pytest.mark.vllm
@pytest.mark.timeout(900)
def test_vllm_anthropic_messages_stream_a_tool_use(thinking_vllm_server) -> None:
    client = anthropic.Anthropic(base_url=thinking_vllm_server.url, api_key="unused")
    body = tb.tool_messages_body(model=tb.VLLM_MODEL)
    with client.messages.stream(**tb.sdk_stream_args(body)) as stream:
        message = stream.get_final_message()
    assert message.content[0].type == "thinking" and message.stop_reason == "tool_use"
    (tool_use,) = [b for b in message.content if b.type == "tool_use"]
    assert tool_use.name == tb.TOOL_NAME and isinstance(tool_use.input["city"], str)
