"""One stream decoder per wire format, shared by infertop's engines and its proxy.

A *dialect* names a wire format of generated answers; :mod:`.kinds` holds one
:class:`~.kinds.Dialect` descriptor per dialect (its framing, decoder, whole-answer
reader, routes), which every module that treats dialects alike asks:

========================  ===========================================================
``openai-chat``           ``/v1/chat/completions`` (:mod:`.openai_chat`)
``openai-completions``    ``/v1/completions`` (:mod:`.openai_chat`)
``openai-responses``      ``/v1/responses``, the Responses API (:mod:`.responses`)
``anthropic``             ``/v1/messages``, Anthropic Messages (:mod:`.anthropic`)
``ollama``                ``/api/chat``, ``/api/generate``, NDJSON (:mod:`.ollama`)
``llama``                 llama-server's ``/completion`` (:mod:`.llama`)
``embeddings``/``rerank`` answers never streamed: a latency and a prompt count only
========================  ===========================================================

:func:`decoder_for` gives a fresh streaming decoder (:class:`.base.StreamDecoder`);
:func:`whole_answer` reads an answer that was not streamed (:mod:`.whole`);
:func:`route_dialect` names the dialect of a route.
"""

from __future__ import annotations

from tui.engines.dialects.kinds import (
    Dialect,
    DialectName,
    decoder_for,
    dialect_named,
    dialect_of_route,
    route_dialect,
    routes,
    whole_answer,
)

__all__ = [
    "Dialect",
    "DialectName",
    "decoder_for",
    "dialect_named",
    "dialect_of_route",
    "route_dialect",
    "routes",
    "whole_answer",
]
