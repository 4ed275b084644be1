"""Which requests are inference, and the bounded names the proxy gives routes and models.

A *measured* request is a POST to a route of a dialect (tui/engines/dialects/kinds.py:
each :class:`~tui.engines.dialects.kinds.Dialect` names its routes): the OpenAI API's
chat and text completions and its Responses API (with or without ``/v1``), Anthropic's
Messages API (``/v1/messages``), Ollama's ``/api/chat`` and ``/api/generate``,
llama-server's own ``/completion``; and, never streamed, embeddings and reranking (a row
with its latency and prompt tokens). Each becomes a row of the requests view and a
timeline, read by the wire format's decoder (tui/engines/dialects). Every other request
(model lists, health checks, an engine's ``/metrics``) is forwarded the same way and only
counted.

Labels on the proxy's Prometheus series come from fixed sets or are capped, since a
client chooses its path and its ``model`` field: a route that is neither a dialect's nor
one of :data:`OTHER_ROUTES` is ``other``; a model is cut to :data:`MODEL_LABEL_CHARS`
characters, and after :data:`MAX_MODEL_LABELS` distinct models every new one is
``other``.
"""

from __future__ import annotations

from tui.engines.dialects import DialectName, dialect_of_route

# the routes labelled by name besides the dialects' (model lists, health, metrics, ...)
OTHER_ROUTES = frozenset(
    {
        "/v1/models",
        "/models",
        "/api/tags",
        "/api/ps",
        "/api/version",
        "/api/show",
        "/health",
        "/metrics",
        "/props",
        "/slots",
        "/tokenize",
        "/detokenize",
        "/version",
        "/",
    }
)
OTHER = "other"
MAX_MODEL_LABELS = 16
MODEL_LABEL_CHARS = 64


def dialect(method: str, path: str) -> DialectName | None:
    """The stream dialect of a generation request, or None for any other request."""
    if method != "POST":
        return None
    found = dialect_of_route(path)
    return None if found is None else found.name


def route_label(path: str) -> str:
    """``path`` when it is a known route (a dialect's or one of :data:`OTHER_ROUTES`),
    else ``other``."""
    return path if path in OTHER_ROUTES or dialect_of_route(path) is not None else OTHER


def streams_by_default(path: str) -> bool:
    """A request to ``path`` that does not say ``"stream"`` streams (its dialect's
    ``streamed_by_default``: Ollama's /api/chat and /api/generate)."""
    found = dialect_of_route(path)
    return found is not None and found.streamed_by_default


class ModelLabels:
    """Bounded model labels: the first :data:`MAX_MODEL_LABELS` distinct names, cut to
    :data:`MODEL_LABEL_CHARS` characters; every later one is ``other``."""

    def __init__(self, limit: int = MAX_MODEL_LABELS) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def label(self, model: str | None) -> str:
        name = (model or "").strip()[:MODEL_LABEL_CHARS] or "(none)"
        if name in self._seen:
            return name
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(name)
        return name
