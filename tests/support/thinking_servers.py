"""A real llama-server that makes SmolLM2 reason and call tools, and the requests that do it.

SmolLM2-135M-Instruct is a plain ChatML model: it was never trained to think or to call
tools. Two real llama.cpp mechanisms make it do both, deterministically (temperature 0):

- the chat template ``tests/data/templates/chatml-think-tools.jinja`` (``--jinja
  --chat-template-file``) opens every assistant turn with ``<think>\\n``, so the model's
  text starts inside a think block; llama.cpp's template analyser finds the ``<think>`` /
  ``</think>`` markers and the Hermes-style ``<tool_call>`` JSON format in it and builds
  the parser that splits the output into reasoning, answer and tool calls;
- reasoning then answer: a reasoning budget (``thinking_budget_tokens`` in the request;
  Anthropic's ``thinking.budget_tokens``) makes the sampler force ``</think>`` after N
  tokens, after which the model writes its answer;
- reasoning then a tool call: two earlier turns in the conversation that did exactly that
  (reasoning, then ``get_weather``) — the model copies the pattern for a third city;
  ``tool_choice: "required"`` adds llama.cpp's tool-call grammar (it still allows text
  before the call, so the examples are what makes the call come first).

The request bodies below are the ones the captures in ``tests/data/streams/`` were made
with (see its README) and the ones ``tests/http/test_thinking_server.py`` checks.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import real_servers

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "tests" / "data" / "templates" / "chatml-think-tools.jinja"
MODEL_ALIAS = "smollm2-think"  # what the server reports as its model (not the GGUF path)

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

# Bounds for reading a test server's stream: these are our own servers, but a wedged one
# must fail a test, not hang it or fill memory.
MAX_STREAM_BYTES = 4 << 20
STREAM_TIMEOUT_S = 120.0


def thinking_server_args() -> list[str]:
    """llama-server flags (after real_servers' usual ones) for reasoning and tool calls."""
    return [
        "--jinja",
        "--chat-template-file",
        str(TEMPLATE),
        "--reasoning-format",
        "deepseek",  # reasoning in reasoning_content (the default "auto" does the same)
        "--alias",
        MODEL_ALIAS,
    ]


@contextmanager
def running_thinking_llama_server(
    model: Path, log_dir: Path
) -> Iterator[real_servers.ServerProcess]:
    """llama-server on ``model`` with the thinking- and tools-capable template: started (or
    skipped, loudly; failed under INFERTOP_REQUIRE_SERVERS=1), yielded, stopped. A session
    fixture wraps it (tests/http/test_thinking_server.py)."""
    with real_servers.running_llama_server(
        model, log_dir, thinking_server_args(), "llama-server (thinking template)"
    ) as sp:
        yield sp


# -- request bodies ------------------------------------------------------------------------


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
                "reasoning_content": _reasoning(city),
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


# -- raw streams ---------------------------------------------------------------------------


def post_raw(url: str, body: dict[str, Any], timeout_s: float = STREAM_TIMEOUT_S) -> bytes:
    """POST ``body`` as JSON; return the response bytes exactly as sent (for SSE, every
    event), at most MAX_STREAM_BYTES and within ``timeout_s`` overall."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    deadline = time.monotonic() + timeout_s
    out = bytearray()
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: stream still open after {timeout_s:.0f} s")
            chunk = r.read1(65536)
            if not chunk:
                return bytes(out)
            out += chunk
            if len(out) > MAX_STREAM_BYTES:
                raise ValueError(f"{url}: stream larger than {MAX_STREAM_BYTES} bytes")


def sse_events(raw: bytes) -> list[tuple[str, Any]]:
    """Split SSE bytes into (event name or "", data) pairs; data is parsed JSON, or the
    raw string where it is not JSON (``[DONE]``). Comments and ids are dropped. A test
    helper for our own servers' output, not a decoder for untrusted bytes."""
    events: list[tuple[str, Any]] = []
    for block in raw.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        name, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if not data:
            continue
        text = "\n".join(data)
        try:
            events.append((name, json.loads(text)))
        except ValueError:
            events.append((name, text))
    return events
