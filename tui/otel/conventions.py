"""The OpenTelemetry GenAI semantic conventions infertop follows: every name, unit and
advised bucket boundary it exports, in one place.

Version followed: the GenAI conventions as published in OpenTelemetry semantic
conventions **v1.44.0** — the registry the Python package
``opentelemetry-semantic-conventions`` 0.66b2 is generated from (its
``_incubating`` ``gen_ai`` attributes and metrics; the GenAI part has since moved to its
own repository, open-telemetry/semantic-conventions-genai, whose documents keep these
names and give the bucket boundaries below). ``tests/otel/test_conventions.py`` holds
every ``gen_ai.*``, ``server.*`` and ``error.*`` name here, each metric's unit and
instrument, to that package's published lists (pinned in the ``dev`` extra).

Names under ``infertop.`` are infertop's own (the conventions allow extra attributes);
docs/otel.md has the table with what each means.
"""

from __future__ import annotations

from typing import Final, Literal

SEMCONV_VERSION: Final = "1.44.0"
SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.44.0"
INSTRUMENTATION_SCOPE: Final = "infertop"

# --- span attributes (gen_ai.*, server.*, error.*) -------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"  # capture_content only
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"  # capture_content only
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"

SPAN_ATTRIBUTES: Final = (
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_REQUEST_STREAM,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_TOKEN_TYPE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OUTPUT_MESSAGES,
    SERVER_ADDRESS,
    SERVER_PORT,
    ERROR_TYPE,
)

# --- infertop's own attributes ---------------------------------------------------------
INFERTOP_SOURCE: Final = "infertop.source"  # proxy | chat | run | bench
INFERTOP_REQUEST_ID: Final = "infertop.request.id"
INFERTOP_ROUTE: Final = "infertop.route"
INFERTOP_API: Final = "infertop.api"
INFERTOP_STATE: Final = "infertop.state"  # done | failed | cancelled
INFERTOP_TTFT: Final = "infertop.ttft_s"
INFERTOP_TTFO: Final = "infertop.ttfo_s"
INFERTOP_THINKING: Final = "infertop.thinking_s"
INFERTOP_ITL_P50: Final = "infertop.itl.p50_s"
INFERTOP_ITL_P90: Final = "infertop.itl.p90_s"
INFERTOP_DECODE_TPS: Final = "infertop.decode.tokens_per_s"
INFERTOP_PREFILL_TPS: Final = "infertop.prefill.tokens_per_s"
INFERTOP_OUTPUT_TOKENS_SOURCE: Final = "infertop.usage.output_tokens.source"
INFERTOP_OUTPUT_TOKENS_ESTIMATE: Final = "infertop.usage.output_tokens.estimate"
INFERTOP_REASONING_TOKENS_SOURCE: Final = "infertop.usage.reasoning_tokens.source"
INFERTOP_REASONING_TOKENS_ESTIMATE: Final = "infertop.usage.reasoning_tokens.estimate"
INFERTOP_ITL_ESTIMATED: Final = "infertop.itl.estimated"
INFERTOP_CLIENT: Final = "infertop.client"  # the client's label (never a key)
INFERTOP_ENGINE_PREFIX: Final = "infertop.engine."  # + an EngineTruth number's name
INFERTOP_ENGINE_SOURCE: Final = "infertop.engine.source"
# why the request took its time (tui/core/verdict.py), where its place gave a verdict
INFERTOP_VERDICT: Final = "infertop.verdict"  # queued | prefill-bound | ... | unknown
INFERTOP_VERDICT_TEXT: Final = "infertop.verdict.text"  # the one line people read

# --- metrics ---------------------------------------------------------------------------
Instrument = Literal["histogram"]


def _doubling(first: float, n: int) -> tuple[float, ...]:
    return tuple(round(first * 2**i, 10) for i in range(n))


# The conventions' advised boundaries (ExplicitBucketBoundaries), seconds and tokens.
DURATION_BUCKETS: Final = _doubling(0.01, 14)  # 0.01, 0.02, ... 81.92
TOKEN_BUCKETS: Final = tuple(float(4**i) for i in range(14))  # 1, 4, ... 67108864
SERVER_TTFT_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0
)  # fmt: skip
SERVER_TPOT_BUCKETS: Final = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5
)  # fmt: skip


class MetricSpec:
    """One metric: its name, unit, instrument, description and advised boundaries."""

    __slots__ = ("name", "unit", "instrument", "description", "buckets")

    def __init__(self, name: str, unit: str, description: str, buckets: tuple[float, ...]) -> None:
        self.name = name
        self.unit = unit
        self.instrument: Instrument = "histogram"
        self.description = description
        self.buckets = buckets


CLIENT_DURATION: Final = MetricSpec(
    "gen_ai.client.operation.duration", "s", "GenAI operation duration.", DURATION_BUCKETS
)
CLIENT_TOKEN_USAGE: Final = MetricSpec(
    "gen_ai.client.token.usage", "{token}", "Number of input and output tokens used.", TOKEN_BUCKETS
)
CLIENT_TIME_TO_FIRST_CHUNK: Final = MetricSpec(
    "gen_ai.client.operation.time_to_first_chunk",
    "s",
    "Time to receive the first chunk, measured from when the client issues the generation "
    "request to when the first chunk is received in the response stream.",
    DURATION_BUCKETS,
)
CLIENT_TIME_PER_OUTPUT_CHUNK: Final = MetricSpec(
    "gen_ai.client.operation.time_per_output_chunk",
    "s",
    "Time per output chunk, recorded for each chunk received after the first one, measured "
    "as the time elapsed from the end of the previous chunk to the end of the current chunk.",
    DURATION_BUCKETS,
)
SERVER_TIME_TO_FIRST_TOKEN: Final = MetricSpec(
    "gen_ai.server.time_to_first_token",
    "s",
    "Time to generate first token for successful responses.",
    SERVER_TTFT_BUCKETS,
)
SERVER_TIME_PER_OUTPUT_TOKEN: Final = MetricSpec(
    "gen_ai.server.time_per_output_token",
    "s",
    "Time per output token generated after the first token for successful responses.",
    SERVER_TPOT_BUCKETS,
)
CLIENT_METRICS: Final = (
    CLIENT_DURATION,
    CLIENT_TOKEN_USAGE,
    CLIENT_TIME_TO_FIRST_CHUNK,
    CLIENT_TIME_PER_OUTPUT_CHUNK,
)
SERVER_METRICS: Final = (SERVER_TIME_TO_FIRST_TOKEN, SERVER_TIME_PER_OUTPUT_TOKEN)
METRICS: Final = CLIENT_METRICS + SERVER_METRICS
# The attributes a metric point carries (a bounded set: see tui/otel/measures.py).
METRIC_ATTRIBUTES: Final = (
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_TOKEN_TYPE,
    SERVER_ADDRESS,
    SERVER_PORT,
    ERROR_TYPE,
)

# --- values ----------------------------------------------------------------------------
Operation = Literal["chat", "text_completion", "embeddings", "rerank"]
TokenType = Literal["input", "output"]

# The engine kind → gen_ai.provider.name ("openai" and "anthropic" are the conventions'
# well-known values; the local servers are custom values, as the conventions allow).
PROVIDERS: Final[dict[str, str]] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "llama-server": "llama.cpp",
    "llamacpp": "llama.cpp",
    "vllm": "vllm",
    "vllm-inprocess": "vllm",
    "ollama": "ollama",
    "synthetic": "infertop.synthetic",
    "replay": "infertop.replay",
}
UNKNOWN_PROVIDER: Final = "_OTHER"

# route endings and wire dialects → gen_ai.operation.name
_ROUTE_OPERATIONS: Final[tuple[tuple[str, Operation], ...]] = (
    ("/chat/completions", "chat"),
    ("/api/chat", "chat"),
    ("/responses", "chat"),
    ("/messages", "chat"),
    ("/completions", "text_completion"),
    ("/api/generate", "text_completion"),
    ("/completion", "text_completion"),
    ("/embeddings", "embeddings"),
    ("/api/embed", "embeddings"),
    ("/rerank", "rerank"),
    ("/reranking", "rerank"),
)
_API_OPERATIONS: Final[dict[str, Operation]] = {
    "openai-chat": "chat",
    "openai-responses": "chat",
    "anthropic": "chat",
    "openai-completions": "text_completion",
    "llama": "text_completion",
    "embeddings": "embeddings",
    "rerank": "rerank",
}


def operation_of(route: str, api: str) -> Operation:
    """gen_ai.operation.name of a request by its route, else its wire dialect, else chat
    (infertop's chat and in-process engines)."""
    for ending, op in _ROUTE_OPERATIONS:
        if route.endswith(ending):
            return op
    return _API_OPERATIONS.get(api, "chat")


def provider_of(kind: str | None) -> str:
    """gen_ai.provider.name of an engine kind (:data:`PROVIDERS`)."""
    return PROVIDERS.get(kind or "", UNKNOWN_PROVIDER)
