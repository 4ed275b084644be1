"""One stream decoder per wire format, shared by infertop's engines and its proxy.

A *dialect* names a wire format of generated answers:

========================  ===========================================================
``openai-chat``           ``/v1/chat/completions`` (:mod:`.openai_chat`)
``openai-completions``    ``/v1/completions`` (:mod:`.openai_chat`)
``openai-responses``      ``/v1/responses``, the Responses API (:mod:`.responses`)
``anthropic``             ``/v1/messages``, Anthropic Messages (:mod:`.anthropic`)
``ollama``                ``/api/chat``, ``/api/generate`` (:mod:`.ollama`)
``llama``                 llama-server's ``/completion`` (:mod:`.llama`)
``embeddings``/``rerank`` answers never streamed: a latency and a prompt count only
========================  ===========================================================

:func:`decoder_for` gives a fresh streaming decoder (:class:`.base.StreamDecoder`);
:func:`~.whole.whole_answer` reads an answer that was not streamed.
"""

from __future__ import annotations

from tui.engines.dialects.anthropic import AnthropicDecoder
from tui.engines.dialects.base import StreamDecoder
from tui.engines.dialects.llama import LlamaCompletionDecoder
from tui.engines.dialects.ollama import OllamaDecoder
from tui.engines.dialects.openai_chat import OpenAIChatDecoder
from tui.engines.dialects.responses import ResponsesDecoder

STREAMED = (
    "openai-chat",
    "openai-completions",
    "openai-responses",
    "anthropic",
    "ollama",
    "llama",
)
NOT_STREAMED = ("embeddings", "rerank")
# path -> the dialect of its answers: every generation route infertop reads (the proxy's
# measured routes are these: tui/proxy/routes.py)
ROUTES: dict[str, str] = {
    "/v1/chat/completions": "openai-chat",
    "/chat/completions": "openai-chat",
    "/v1/completions": "openai-completions",
    "/completions": "openai-completions",
    "/v1/responses": "openai-responses",
    "/responses": "openai-responses",
    "/v1/messages": "anthropic",
    "/api/chat": "ollama",
    "/api/generate": "ollama",
    "/completion": "llama",
    "/v1/embeddings": "embeddings",
    "/embeddings": "embeddings",
    "/api/embed": "embeddings",
    "/api/embeddings": "embeddings",
    "/v1/rerank": "rerank",
    "/rerank": "rerank",
    "/v1/reranking": "rerank",
    "/reranking": "rerank",
}


def route_dialect(path: str) -> str | None:
    """The dialect of the route ``path`` ends with (a server behind a path prefix too),
    or None."""
    found = ROUTES.get(path)
    if found is not None:
        return found
    for route in sorted(ROUTES, key=len, reverse=True):
        if path.endswith(route):
            return ROUTES[route]
    return None


def decoder_for(dialect: str) -> StreamDecoder:
    """A fresh decoder for one streamed answer in ``dialect`` (ValueError: unknown)."""
    if dialect == "openai-chat":
        return OpenAIChatDecoder("chat")
    if dialect == "openai-completions":
        return OpenAIChatDecoder("completions")
    if dialect == "openai-responses":
        return ResponsesDecoder()
    if dialect == "anthropic":
        return AnthropicDecoder()
    if dialect == "ollama":
        return OllamaDecoder()
    if dialect == "llama":
        return LlamaCompletionDecoder()
    raise ValueError(f"no streaming decoder for {dialect!r}")
