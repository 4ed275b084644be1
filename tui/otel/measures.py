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
from collections.abc import Callable
from typing import Final, NamedTuple

from tui.core.outcome import RequestOutcome
from tui.otel import conventions as C
from tui.otel.spans import server_of

MAX_MODELS = 32
MODEL_CHARS = 64
MS: float = 1000.0  # ``per`` of values in milliseconds, as a request's metrics hold them
Attributes = dict[str, str | int]
# an attribute set as the histogram table keys it: the repr of its sorted items (one
# string, whose hash Python keeps: a kept set's key costs no hashing per request)
AttributeKey = str


class Point(NamedTuple):
    """A metric's values from one request (the chunk gaps are many) with their attributes:
    the metric's values are ``values[i] / per`` (``per`` = :data:`MS` for times kept in
    milliseconds: the table divides where it must, not each value up front)."""

    spec: C.MetricSpec
    values: list[float]
    attributes: Attributes
    per: float = 1.0
    key: AttributeKey | None = None  # the attributes' table key, where made already

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


SETS_KEPT: Final = 1024  # attribute sets kept (routes and upstreams are few; past it, afresh)


def sorted_key(attributes: Attributes) -> AttributeKey:
    """An attribute set as the histogram table keys it (tui/otel/aggregate.py): the
    repr of its sorted items (a str's and an int's repr tell them apart)."""
    return repr(sorted(attributes.items()))


class _Sets(NamedTuple):
    """The attribute sets of one (operation, provider, model, server, error) and their
    table keys, made once: ``duration`` is ``base`` with ``error.type`` on a failed
    request."""

    base: Attributes
    base_key: AttributeKey
    duration: Attributes
    duration_key: AttributeKey
    input: Attributes
    input_key: AttributeKey
    output: Attributes
    output_key: AttributeKey


class AttributeSets:
    """The metric points' attribute sets, each made once per (route, dialect, engine kind,
    model, upstream, error) and shared by every request with the same ones (the
    exporter's thread builds and keys them once, not per request). Model names are
    bounded (:class:`BoundedModels`); at most :data:`SETS_KEPT` sets are kept (then the
    cache starts afresh: a client that makes up routes costs a rebuild, never memory).
    The sets are shared: never change one."""

    def __init__(self, models: BoundedModels | None = None) -> None:
        self.models = models or BoundedModels()
        self._sets: dict[tuple[str, str, str | None, str | None, str, str | None], _Sets] = {}

    def of(self, o: RequestOutcome) -> _Sets:
        model = self.models.label(o.model) if o.model else None
        error = (o.error_kind or "_OTHER") if o.state == "failed" else None
        key = (o.route, o.api, o.kind, model, o.upstream, error)
        found = self._sets.get(key)
        if found is not None:
            return found
        base: Attributes = {
            C.GEN_AI_OPERATION_NAME: C.operation_of(o.route, o.api),
            C.GEN_AI_PROVIDER_NAME: C.provider_of(o.kind),
        }
        if model is not None:
            base[C.GEN_AI_REQUEST_MODEL] = model
        address, port = server_of(o.upstream)
        if address is not None and port is not None:
            base[C.SERVER_ADDRESS] = address
            base[C.SERVER_PORT] = port
        duration = base if error is None else {**base, C.ERROR_TYPE: error}
        given = {**base, C.GEN_AI_TOKEN_TYPE: "input"}
        got = {**base, C.GEN_AI_TOKEN_TYPE: "output"}
        made = _Sets(
            base, sorted_key(base), duration, sorted_key(duration),
            given, sorted_key(given), got, sorted_key(got),
        )  # fmt: skip
        if len(self._sets) >= SETS_KEPT:
            self._sets.clear()
        self._sets[key] = made
        return made


def points_of(o: RequestOutcome, sets: AttributeSets) -> list[Point]:
    """The metric points of one finished request (see the module docstring)."""
    out: list[Point] = []
    each_point(o, sets, lambda *p: out.append(Point(*p)))
    return out


def each_point(o: RequestOutcome, sets: AttributeSets, emit: Callable[..., object]) -> None:
    """:func:`points_of`, each point handed to ``emit(spec, values, attributes, per,
    key)`` as it is made (the exporter records them so, with no Point in between)."""
    m = o.metrics
    a = sets.of(o)
    base, key = a.base, a.base_key
    emit(C.CLIENT_DURATION, [o.e2e_s], a.duration, 1.0, a.duration_key)
    if m.prompt_tokens is not None:
        emit(C.CLIENT_TOKEN_USAGE, [float(m.prompt_tokens)], a.input, 1.0, a.input_key)
    estimated = m.output_tokens_estimated
    if m.output_tokens is not None and not estimated:
        emit(C.CLIENT_TOKEN_USAGE, [float(m.output_tokens)], a.output, 1.0, a.output_key)
    if o.streamed is False:
        return
    if m.ttft_ms is not None:
        emit(C.CLIENT_TIME_TO_FIRST_CHUNK, [m.ttft_ms], base, MS, key)
    if m.itl_chunk_ms:  # one per chunk: left in ms (the table scales)
        emit(C.CLIENT_TIME_PER_OUTPUT_CHUNK, m.itl_chunk_ms, base, MS, key)
    if o.source == "proxy" and o.state == "done":
        if m.ttft_ms is not None:
            emit(C.SERVER_TIME_TO_FIRST_TOKEN, [m.ttft_ms], base, MS, key)
        if m.tpot_ms is not None and not estimated:
            emit(C.SERVER_TIME_PER_OUTPUT_TOKEN, [m.tpot_ms], base, MS, key)
