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
