"""Real servers that make SmolLM2 reason and call tools: llama-server and vLLM's CPU build,
with a thinking- and tools-capable chat template; and bounded raw reads of their streams.

SmolLM2-135M-Instruct is a plain ChatML model: it was never trained to think or to call
tools. Real mechanisms of the servers make it do both, deterministically (temperature 0):

- the chat template ``tests/data/templates/chatml-think-tools.jinja`` opens every assistant
  turn with ``<think>\\n``, so the model's text starts inside a think block. llama.cpp's
  template analyser (``--jinja --chat-template-file``) finds the ``<think>`` / ``</think>``
  markers and the Hermes-style ``<tool_call>`` JSON format in it and builds the parser that
  splits the output into reasoning, answer and tool calls; vLLM does the same with
  ``--reasoning-parser qwen3 --tool-call-parser hermes``;
- the request bodies (``thinking_bodies.py``) then make the model end its reasoning: by a
  reasoning budget (llama-server forces ``</think>`` after N tokens), or by example turns
  in the conversation that the model copies (reasoning, then an answer or a tool call).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support import real_servers

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "tests" / "data" / "templates" / "chatml-think-tools.jinja"
MODEL_ALIAS = "smollm2-think"  # what llama-server reports as its model (not the GGUF path)

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


def thinking_vllm_args() -> list[str]:
    """vLLM flags (after real_servers' usual ones): the same template, its qwen3 reasoning
    parser (reasoning from the start of the turn to ``</think>``, matched as text) and its
    hermes tool parser (``<tool_call>`` JSON). deepseek_r1 cannot run on SmolLM2: it needs
    ``<think>`` and ``</think>`` as single tokens of the vocabulary."""
    return [
        "--chat-template",
        str(TEMPLATE),
        "--reasoning-parser",
        "qwen3",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
    ]


@contextmanager
def running_thinking_vllm_server(log_dir: Path) -> Iterator[real_servers.ServerProcess]:
    """vLLM's CPU server on SmolLM2 with thinking_vllm_args() (60-80 s to start, ~4 GB):
    started (or skipped, loudly; failed under INFERTOP_REQUIRE_SERVERS=1), yielded,
    stopped. Its model is ``thinking_bodies.VLLM_MODEL``: pass it as the bodies' ``model``."""
    what = "vLLM (thinking template)"
    if os.environ.get("INFERTOP_SKIP_VLLM") == "1":
        real_servers.unavailable(what, "INFERTOP_SKIP_VLLM=1")
    try:
        sp = real_servers.start_vllm_server(log_dir, extra_args=thinking_vllm_args())
    except real_servers.ServerStartError as e:
        real_servers.unavailable(what, str(e))
    try:
        yield sp
    finally:
        sp.stop()


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
