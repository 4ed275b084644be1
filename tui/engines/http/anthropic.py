"""A server speaking Anthropic's Messages API (``POST /v1/messages``): Anthropic's own,
or any server that serves the same API (llama-server does), so a user can chat with and
bench a server through the API their agents (Claude Code) use.

The key comes from the environment variable named by ``api_key_env`` and is sent as
``x-api-key`` (with ``anthropic-version``), only to this engine's server. The
conversation's system messages become the top-level ``system`` text; the rest go as
``messages``. The stream is read by tui/engines/dialects/anthropic.py (the proxy reads
Claude Code's traffic with the same decoder): thinking apart from the answer, tool calls,
the prompt's tokens from ``message_start``, the output's from the last ``message_delta``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tui.engines.base import GenerationRequest
from tui.engines.dialects import Dialect, dialect_named
from tui.engines.http.openai_compat import OpenAICompatEngine


class AnthropicEngine(OpenAICompatEngine):
    """Streams from ``/v1/messages`` (see the module docstring)."""

    kind: ClassVar[str] = "anthropic"
    endpoints: ClassVar[tuple[str, ...]] = ("chat",)  # the config default; one API here

    def stream_url(self) -> str:
        return self.base + "/v1/messages"

    def dialect(self) -> Dialect:
        return dialect_named("anthropic")

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        system = "\n\n".join(
            m.get("content", "") for m in request.messages if m.get("role") == "system"
        )
        body: dict[str, Any] = {
            "stream": True,
            "max_tokens": request.max_tokens,
            "messages": [m for m in request.messages if m.get("role") != "system"],
            "temperature": request.temperature,
        }
        if request.top_p < 1.0:
            body["top_p"] = request.top_p
        if system:
            body["system"] = system
        return self.finish_body(body)
