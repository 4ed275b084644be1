"""The requests that make SmolLM2 reason and call tools on the servers of
``thinking_servers.py``, in each wire format: OpenAI chat/completions and completions, the
Responses API, Anthropic Messages. Every body streams, at temperature 0.

- reasoning then answer, by budget (llama-server only): ``thinking_budget_tokens`` (the
  Anthropic shape: ``thinking.budget_tokens``) makes llama.cpp's sampler force
  ``</think>`` after REASONING_BUDGET tokens; the model then answers. vLLM's
  ``thinking_token_budget`` forces ``</think>`` too, but SmolLM2 then ends its turn;
- reasoning then answer, by example (both servers): one earlier turn that did so;
- reasoning then a tool call (both servers): two earlier turns that reasoned and then
  called ``get_weather``; the model copies the pattern for a third city.
  ``tool_choice: "required"`` adds llama.cpp's tool-call grammar, which still allows text
  before the call: the examples are what make the call come first.

These are the bodies of the captures in ``tests/data/streams/`` (see its README) and of
``tests/http/test_thinking_server.py``. Each takes ``**extra`` fields that replace or add
top-level fields (``model=VLLM_MODEL`` for vLLM).
"""

from __future__ import annotations

import json
from typing import Any

from tests.support import thinking_servers

MODEL_ALIAS = thinking_servers.MODEL_ALIAS
VLLM_MODEL = "smollm2"  # real_servers.start_vllm_server's --served-model-name

# Reasoning tokens before the sampler forces ``</think>`` (the reasoning-then-answer case).
REASONING_BUDGET = 6
SEED = 42
QUESTION = "What is the capital of France?"
TOOL_QUESTION = "What is the weather in Paris?"
TOOL_NAME = "get_weather"
_CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
_TOOL_DESCRIPTION = "Get the current weather for a city"
_EXAMPLE_CITIES = ("London", "Tokyo")


def _reasoning(city: str) -> str:
    return f"The user asks about the weather in {city}. I will call {TOOL_NAME}."


def chat_tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "description": _TOOL_DESCRIPTION,
                "parameters": _CITY_SCHEMA,
            },
        }
    ]


def reasoning_chat_body(**extra: Any) -> dict[str, Any]:
    """/v1/chat/completions: reasoning (REASONING_BUDGET tokens) then an answer, with usage."""
    body: dict[str, Any] = {
        "model": MODEL_ALIAS,
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 40,
        "temperature": 0,
        "seed": SEED,
        "thinking_budget_tokens": REASONING_BUDGET,
    }
    return body | extra


_EXAMPLE_QUESTION = "What is the capital of Italy?"
_EXAMPLE_REASONING = "The user asks for the capital of Italy. It is Rome."
_EXAMPLE_ANSWER = "The capital of Italy is Rome."


def reasoning_example_chat_body(**extra: Any) -> dict[str, Any]:
    """/v1/chat/completions: reasoning then an answer with no budget, from one example turn
    that did so (the model copies it: "...It is Paris." then "The capital of France is
    Paris."). For vLLM, whose thinking_token_budget ends the turn at the forced end."""
    example = {
        "role": "assistant",
        "content": _EXAMPLE_ANSWER,
        "reasoning_content": _EXAMPLE_REASONING,  # llama-server's field
        "reasoning": _EXAMPLE_REASONING,  # vLLM's field
    }
    messages = [
        {"role": "user", "content": _EXAMPLE_QUESTION},
        example,
        {"role": "user", "content": QUESTION},
    ]
    body = reasoning_chat_body(messages=messages) | extra
    if "thinking_budget_tokens" not in extra:
        del body["thinking_budget_tokens"]  # no budget: the example ends the reasoning
    return body


def tool_chat_messages() -> list[dict[str, Any]]:
    """Two example turns (reasoning, then a get_weather call), then the question."""
    messages: list[dict[str, Any]] = []
    for i, city in enumerate(_EXAMPLE_CITIES, 1):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": json.dumps({"city": city})},
        }
        messages += [
            {"role": "user", "content": f"What is the weather in {city}?"},
            {
                "role": "assistant",
                "content": None,
                # llama-server reads reasoning_content, vLLM reads reasoning: both, so
                # that one body serves both servers
                "reasoning_content": _reasoning(city),
                "reasoning": _reasoning(city),
                "tool_calls": [call],
            },
        ]
    return [*messages, {"role": "user", "content": TOOL_QUESTION}]


def tool_chat_body(**extra: Any) -> dict[str, Any]:
    """/v1/chat/completions: reasoning then a get_weather(Paris) call, with usage."""
    body: dict[str, Any] = {
        "model": MODEL_ALIAS,
        "messages": tool_chat_messages(),
        "tools": chat_tools(),
        "tool_choice": "required",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 80,
        "temperature": 0,
        "seed": SEED,
    }
    return body | extra


def completions_body(**extra: Any) -> dict[str, Any]:
    """/v1/completions (no template, no reasoning): a plain text stream with usage."""
    body: dict[str, Any] = {
        "model": MODEL_ALIAS,
        "prompt": "The capital of France is",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 8,
        "temperature": 0,
        "seed": SEED,
    }
    return body | extra


def reasoning_responses_body(**extra: Any) -> dict[str, Any]:
    """/v1/responses: reasoning then an answer (llama.cpp passes the budget through)."""
    body: dict[str, Any] = {
        "model": MODEL_ALIAS,
        "input": QUESTION,
        "stream": True,
        "max_output_tokens": 40,
        "temperature": 0,
        "seed": SEED,
        "thinking_budget_tokens": REASONING_BUDGET,
    }
    return body | extra


def reasoning_example_responses_body(**extra: Any) -> dict[str, Any]:
    """/v1/responses: the example turn as input items, then the question (as
    reasoning_example_chat_body)."""
    items = [
        {"role": "user", "content": _EXAMPLE_QUESTION},
        {
            "type": "reasoning",
            "id": "rs_example",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": _EXAMPLE_REASONING}],
        },
        {  # llama-server needs an assistant item's type and output_text parts
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": _EXAMPLE_ANSWER}],
        },
        {"role": "user", "content": QUESTION},
    ]
    body = reasoning_responses_body(input=items) | extra
    if "thinking_budget_tokens" not in extra:
        del body["thinking_budget_tokens"]
    return body


def tool_responses_body(**extra: Any) -> dict[str, Any]:
    """/v1/responses: the example turns as input items (reasoning, function_call), then a
    function call for Paris."""
    items: list[dict[str, Any]] = []
    for i, city in enumerate(_EXAMPLE_CITIES, 1):
        items += [
            {"role": "user", "content": f"What is the weather in {city}?"},
            {
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": _reasoning(city)}],
            },
            {
                "type": "function_call",
                "call_id": f"call_{i}",
                "name": TOOL_NAME,
                "arguments": json.dumps({"city": city}),
            },
        ]
    body: dict[str, Any] = {
        "model": MODEL_ALIAS,
        "input": [*items, {"role": "user", "content": TOOL_QUESTION}],
        "tools": [
            {
                "type": "function",
                "name": TOOL_NAME,
                "description": _TOOL_DESCRIPTION,
                "parameters": _CITY_SCHEMA,
            }
        ],
        "tool_choice": "required",
        "stream": True,
        "max_output_tokens": 80,
        "temperature": 0,
        "seed": SEED,
    }
    return body | extra


def reasoning_messages_body(**extra: Any) -> dict[str, Any]:
    """Anthropic /v1/messages: thinking (budget_tokens = REASONING_BUDGET) then text."""
    body: dict[str, Any] = {
        "model": MODEL_ALIAS,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 40,
        "temperature": 0,
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": REASONING_BUDGET},
    }
    return body | extra


def reasoning_example_messages_body(**extra: Any) -> dict[str, Any]:
    """Anthropic /v1/messages: the example turn (thinking and text blocks), then the
    question. No ``thinking`` field: both servers reason by the template's default, and
    vLLM refuses a ``budget_tokens`` under 1024 (Anthropic's own minimum), which must also
    stay under ``max_tokens``."""
    messages = [
        {"role": "user", "content": _EXAMPLE_QUESTION},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": _EXAMPLE_REASONING, "signature": ""},
                {"type": "text", "text": _EXAMPLE_ANSWER},
            ],
        },
        {"role": "user", "content": QUESTION},
    ]
    body = reasoning_messages_body(messages=messages) | extra
    if "thinking" not in extra:
        del body["thinking"]
    return body


def tool_messages() -> list[dict[str, Any]]:
    """The example turns in Anthropic's shape (thinking and tool_use blocks), then the
    question."""
    messages: list[dict[str, Any]] = []
    for i, city in enumerate(_EXAMPLE_CITIES, 1):
        messages += [
            {"role": "user", "content": f"What is the weather in {city}?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": _reasoning(city), "signature": ""},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": TOOL_NAME,
                        "input": {"city": city},
                    },
                ],
            },
        ]
    return [*messages, {"role": "user", "content": TOOL_QUESTION}]


def tool_messages_body(**extra: Any) -> dict[str, Any]:
    """Anthropic /v1/messages: thinking then a tool_use block for get_weather(Paris)."""
    body: dict[str, Any] = {
        "model": MODEL_ALIAS,
        "messages": tool_messages(),
        "tools": [
            {"name": TOOL_NAME, "description": _TOOL_DESCRIPTION, "input_schema": _CITY_SCHEMA}
        ],
        "tool_choice": {"type": "any"},
        "max_tokens": 80,
        "temperature": 0,
        "stream": True,
    }
    return body | extra


def sdk_stream_args(body: dict[str, Any]) -> dict[str, Any]:
    """The anthropic SDK's ``messages.stream()`` keywords for one of these Messages bodies:
    the SDK sets ``stream`` itself and has no temperature parameter, so the temperature
    goes as an extra field."""
    args = {k: v for k, v in body.items() if k not in ("stream", "temperature")}
    return args | {"extra_body": {"temperature": body["temperature"]}}
