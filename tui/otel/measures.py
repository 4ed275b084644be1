"""One finished request as GenAI metric points (what tui/otel/export.py records).

Per request (:func:`points_of`), by the conventions' definitions (tui/otel/conventions.py):

- ``gen_ai.client.operation.duration``: request sent → stream's end, seconds; every
  request that ended, ``error.type`` on a failed one.
- ``gen_ai.client.token.usage``: the prompt's and the answer's tokens, one point each
  (``gen_ai.token.type`` input / output), the engine's counts only: a count infertop
  estimated is not usage (the conventions: "MUST NOT report" what it cannot obtain).
- ``gen_ai.client.operation.time_to_first_chunk``: TTFT of a streamed request.
- ``gen_ai.client.operation.time_per_output_chunk``: each gap between chunks with text
  after the first (infertop's per-chunk ITL).
- for the proxy (it stands at the server's edge) also ``gen_ai.server.time_to_first_token``
  (TTFT) and ``gen_ai.server.time_per_output_token`` (TPOT: (e2e − TTFT) ÷ (output
  tokens − 1)), of successful requests.

Attributes are bounded: the model a client names is one of the first
:data:`MAX_MODELS` seen (cut to 64 characters), every later one ``_OTHER``, so a client
cannot grow the exporter's memory by naming models.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from tui.core.outcome import RequestOutcome
from tui.otel import conventions as C
from tui.otel.spans import server_of

MAX_MODELS = 32
MODEL_CHARS = 64
MS: float = 1000.0  # ``per`` of values in milliseconds, as a request's metrics hold them
Attributes = dict[str, str | int]


class Point(NamedTuple):
    """A metric's values from one request (the chunk gaps are many) with their attributes:
    the metric's values are ``values[i] / per`` (``per`` = :data:`MS` for times kept in
    milliseconds: the table divides where it must, not each value up front)."""

    spec: C.MetricSpec
    values: list[float]
    attributes: Attributes
    per: float = 1.0

    def scaled(self) -> list[float]:
        """The metric's values, in its unit."""
        return [v / self.per for v in self.values]


class BoundedModels:
    """The first :data:`MAX_MODELS` model names; every later one is ``_OTHER``."""

    def __init__(self, limit: int = MAX_MODELS) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def label(self, model: str) -> str:
        name = model[:MODEL_CHARS]
        with self._lock:
            if name in self._seen:
                return name
            if len(self._seen) >= self.limit:
                return "_OTHER"
            self._seen.add(name)
            return name


def points_of(o: RequestOutcome, models: BoundedModels) -> list[Point]:
    """The metric points of one finished request (see the module docstring)."""
    m = o.metrics
    base: Attributes = {
        C.GEN_AI_OPERATION_NAME: C.operation_of(o.route, o.api),
        C.GEN_AI_PROVIDER_NAME: C.provider_of(o.kind),
    }
    if o.model:
        base[C.GEN_AI_REQUEST_MODEL] = models.label(o.model)
    address, port = server_of(o.upstream)
    if address is not None and port is not None:
        base[C.SERVER_ADDRESS] = address
        base[C.SERVER_PORT] = port
    duration = dict(base)
    if o.state == "failed":
        duration[C.ERROR_TYPE] = o.error_kind or "_OTHER"
    out = [Point(C.CLIENT_DURATION, [o.e2e_s], duration)]
    if m.prompt_tokens is not None:
        out.append(Point(C.CLIENT_TOKEN_USAGE, [float(m.prompt_tokens)], _typed(base, "input")))
    if m.output_tokens is not None and not m.output_tokens_estimated:
        out.append(Point(C.CLIENT_TOKEN_USAGE, [float(m.output_tokens)], _typed(base, "output")))
    streamed = o.streamed is not False
    if streamed and m.ttft_ms is not None:
        out.append(Point(C.CLIENT_TIME_TO_FIRST_CHUNK, [m.ttft_ms], base, MS))
    if streamed and m.itl_chunk_ms:  # one per chunk: left in ms (the table scales)
        out.append(Point(C.CLIENT_TIME_PER_OUTPUT_CHUNK, m.itl_chunk_ms, base, MS))
    if o.source == "proxy" and o.state == "done" and streamed:
        if m.ttft_ms is not None:
            out.append(Point(C.SERVER_TIME_TO_FIRST_TOKEN, [m.ttft_ms], base, MS))
        if m.tpot_ms is not None and not m.output_tokens_estimated:
            out.append(Point(C.SERVER_TIME_PER_OUTPUT_TOKEN, [m.tpot_ms], base, MS))
    return out


def _typed(base: Attributes, token_type: C.TokenType) -> Attributes:
    return {**base, C.GEN_AI_TOKEN_TYPE: token_type}
