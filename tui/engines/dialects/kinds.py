"""Dialects: one descriptor per wire format of generated answers (:class:`Dialect`), the
one place each dialect's facts are written — its name, how its answers come (framing),
the decoder class that reads a streamed answer, the reader of an answer read whole, the
routes whose answers are in it, and whether a request that does not say streams. Every
module that treats dialects alike asks this registry: the HTTP engines (which decoder,
which Content-Type), the proxy's routes (which requests are measured, which stream by
default) and its observer (which decoder for the Content-Type that came), and
:func:`whole_answer`. Adding a dialect is one :class:`Dialect` entry (here, or
:func:`register`) and one decoder class (:mod:`.base`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

from tui.engines.dialects.anthropic import AnthropicDecoder
from tui.engines.dialects.base import CONTENT_TYPES, Emit, Framing, StreamDecoder
from tui.engines.dialects.llama import LlamaCompletionDecoder
from tui.engines.dialects.ollama import OllamaDecoder
from tui.engines.dialects.openai_chat import OpenAIChatDecoder, OpenAICompletionsDecoder
from tui.engines.dialects.responses import ResponsesDecoder
from tui.engines.dialects.whole import (
    WholeReader,
    finish_whole,
    read_anthropic,
    read_chat,
    read_completions,
    read_llama,
    read_ollama,
    read_prompt_only,
    read_responses,
)

DialectName = Literal[
    "openai-chat",
    "openai-completions",
    "openai-responses",
    "anthropic",
    "ollama",
    "llama",
    "embeddings",
    "rerank",
]


@dataclass(frozen=True)
class Dialect:
    """What infertop knows of one wire format of answers."""

    name: DialectName
    framing: Framing  # how its answers stream ("whole": never streamed)
    decoder: type[StreamDecoder] | None  # reads a streamed answer (None: never streamed)
    whole: WholeReader  # reads an answer not streamed (tui/engines/dialects/whole.py)
    paths: tuple[str, ...]  # the routes whose answers are in it (a POST to one)
    streamed_by_default: bool = False  # a request that does not say "stream" streams

    def new_decoder(self) -> StreamDecoder:
        """A fresh decoder for one streamed answer (ValueError: never streamed)."""
        if self.decoder is None:
            raise ValueError(f"no streaming decoder for {self.name!r}")
        return self.decoder(self.framing)

    def read_whole(self, obj: dict[str, Any], t_ns: int, emit: Emit) -> None:
        """The events of one answer read whole at ``t_ns``, ending with Finished."""
        finish_whole(self.whole(obj, t_ns, emit), t_ns, emit)

    @property
    def content_type(self) -> str:
        """What a streamed answer's Content-Type holds ("event-stream", "json")."""
        return CONTENT_TYPES[self.framing][0]

    @property
    def content_name(self) -> str:
        """That, in words ("an event stream", "NDJSON")."""
        return CONTENT_TYPES[self.framing][1]


_BUILT_IN = (
    Dialect(
        "openai-chat",
        "sse",
        OpenAIChatDecoder,
        read_chat,
        ("/v1/chat/completions", "/chat/completions"),
    ),
    Dialect(
        "openai-completions",
        "sse",
        OpenAICompletionsDecoder,
        read_completions,
        ("/v1/completions", "/completions"),
    ),
    Dialect(
        "openai-responses", "sse", ResponsesDecoder, read_responses, ("/v1/responses", "/responses")
    ),
    Dialect("anthropic", "sse", AnthropicDecoder, read_anthropic, ("/v1/messages",)),
    Dialect(
        "ollama",
        "ndjson",
        OllamaDecoder,
        read_ollama,
        ("/api/chat", "/api/generate"),
        streamed_by_default=True,
    ),
    Dialect("llama", "sse", LlamaCompletionDecoder, read_llama, ("/completion",)),
    Dialect(
        "embeddings",
        "whole",
        None,
        read_prompt_only,
        ("/v1/embeddings", "/embeddings", "/api/embed", "/api/embeddings"),
    ),
    Dialect(
        "rerank",
        "whole",
        None,
        read_prompt_only,
        ("/v1/rerank", "/rerank", "/v1/reranking", "/reranking"),
    ),
)
# the dialect a streamed answer is read as when its route's dialect does not stream in
# the framing that came (an event stream from an embeddings route, say)
FRAMING_DEFAULTS: Final[Mapping[Framing, DialectName]] = MappingProxyType(
    {"sse": "openai-chat", "ndjson": "ollama"}
)

_DIALECTS: dict[str, Dialect] = {d.name: d for d in _BUILT_IN}
_ROUTES: dict[str, Dialect] = {p: d for d in _BUILT_IN for p in d.paths}


def register(dialect: Dialect) -> Dialect:
    """Add (or replace) a dialect and its routes."""
    unregister(dialect.name)
    _DIALECTS[dialect.name] = dialect
    for path in dialect.paths:
        _ROUTES[path] = dialect
    return dialect


def unregister(name: str) -> None:
    """Forget a dialect and its routes (tests); an unknown name is no error."""
    gone = _DIALECTS.pop(name, None)
    if gone is not None:
        for path in gone.paths:
            if _ROUTES.get(path) is gone:
                del _ROUTES[path]


def dialects() -> tuple[Dialect, ...]:
    """Every dialect known now, built-in ones first."""
    return tuple(_DIALECTS.values())


def dialect_named(name: str) -> Dialect:
    """The dialect called ``name`` (ValueError: no such dialect)."""
    found = _DIALECTS.get(name)
    if found is None:
        raise ValueError(f"no dialect {name!r} (known: {', '.join(_DIALECTS)})")
    return found


def routes() -> Mapping[str, DialectName]:
    """Every generation route and the dialect of its answers (a read-only view)."""
    return MappingProxyType({p: d.name for p, d in _ROUTES.items()})


def dialect_of_route(path: str) -> Dialect | None:
    """The dialect of the answers to a POST to exactly ``path``; None: not generation."""
    return _ROUTES.get(path)


def route_dialect(path: str) -> DialectName | None:
    """The name of the dialect of the route ``path`` ends with (a server behind a path
    prefix too), or None."""
    found = _ROUTES.get(path)
    if found is None:
        for route in sorted(_ROUTES, key=len, reverse=True):
            if path.endswith(route):
                found = _ROUTES[route]
                break
    return None if found is None else found.name


def streamed_as(name: str, framing: Framing) -> Dialect:
    """The dialect to read an answer of dialect ``name`` with when it came in ``framing``:
    ``name``'s own where it streams so, else :data:`FRAMING_DEFAULTS`'s."""
    own = _DIALECTS.get(name)
    if own is not None and own.framing == framing:
        return own
    return _DIALECTS[FRAMING_DEFAULTS[framing]]


def decoder_for(name: str) -> StreamDecoder:
    """A fresh decoder for one streamed answer in dialect ``name`` (ValueError: unknown,
    or never streamed)."""
    return dialect_named(name).new_decoder()


def whole_answer(name: str, obj: dict[str, Any], t_ns: int, emit: Emit) -> None:
    """The events of one answer in dialect ``name`` read whole at ``t_ns``, ending with
    Finished (:mod:`.whole`; ValueError: no such dialect)."""
    dialect_named(name).read_whole(obj, t_ns, emit)
