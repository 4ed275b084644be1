"""Stream events: what an engine says while it answers one request.

Every event carries ``t_ns``, a ``time.perf_counter_ns()`` reading taken where the event
happened: in the generation thread for in-process engines, where the bytes were read for
HTTP engines. Never where it is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal, NewType, get_args

# What a chunk of generated text is (TextChunk.part). A reasoning model's stream carries
# its thinking apart from its answer (``reasoning_content``, ``thinking_delta``, a
# ``<think>`` block, ...); a tool call is an answer too, written as ``name(arguments)``.
Part = Literal["answer", "reasoning", "tool"]
ANSWER: Final = "answer"
REASONING: Final = "reasoning"
TOOL: Final = "tool"
PARTS: Final[tuple[Part, ...]] = (ANSWER, REASONING, TOOL)

# What went wrong when a stream ends with Failed (Failed.kind; the Failed docstring)
FailureKind = Literal[
    "connect", "http", "protocol", "timeout", "load", "engine", "cancelled", "internal"
]
FAILURE_KINDS: Final[tuple[FailureKind, ...]] = get_args(FailureKind)

# How a stream ended (Finished.reason): infertop's own words, or an engine's word kept as
# the engine said it ("tool_calls", "eos", "limit", ...), bounded (:func:`engine_word`)
OwnReason = Literal["stop", "length", "cancelled", "tool_calls"]
EngineWord = NewType("EngineWord", str)
FinishReason = OwnReason | EngineWord
EndReason = FinishReason | Literal["error"]  # a timeline's: "error" when it Failed
WORD_CHARS: Final = 40  # characters of an engine's word kept
MODEL_CHARS: Final = 200  # the longest model name kept from an answer (Finished.model)


def engine_word(v: object) -> EngineWord | None:
    """An engine's word (a finish reason, a stop type) as kept: None when it gave none
    (absent, empty, null), else at most :data:`WORD_CHARS` characters; a value that is
    not text stands as its type's name."""
    if not v:
        return None
    if type(v) is str:
        return EngineWord(v[:WORD_CHARS])
    if type(v) in (int, float, bool):
        return EngineWord(str(v)[:WORD_CHARS])
    return EngineWord(type(v).__name__)  # a list or an object: its kind, not its contents


def model_name(value: object) -> str | None:
    """A model name an answer gave (its ``model`` field), as kept: at most
    :data:`MODEL_CHARS` characters; None when it is not a name (absent, empty, not text).
    Server text: whatever shows it passes :func:`tui.core.safe_text.terminal_safe`."""
    return value[:MODEL_CHARS] if type(value) is str and value else None


def part_of(v: object) -> Part:
    """``v`` as a chunk's part, read back from a file: one of :data:`PARTS`, else answer."""
    for part in PARTS:
        if v == part:
            return part
    return ANSWER


def failure_kind_of(v: object) -> FailureKind | None:
    """``v`` as a failure's kind, read back from a file (None: not one of them)."""
    for kind in FAILURE_KINDS:
        if v == kind:
            return kind
    return None


def end_reason_of(v: object) -> EndReason | None:
    """``v`` as how a stream ended, read back from a file: "error", or a finish reason
    (an engine's word, bounded); None when it says none."""
    return "error" if v == "error" else engine_word(v)


@dataclass(frozen=True, slots=True)
class RequestSent:
    """The request left the client (start of TTFT, TTFR and e2e)."""

    t_ns: int


@dataclass(frozen=True, slots=True)
class FirstByte:
    """The first bytes of any response chunk arrived (TTFR), content or not."""

    t_ns: int


@dataclass(frozen=True, slots=True)
class StampSource:
    """How this request's stamps are taken: "kernel receive time (SO_TIMESTAMPNS)", "time
    the read returned (httpx: https or a proxy)", "llama.cpp's generation thread ...".
    Emitted once per request, when it is known (for HTTP: when the response head came)."""

    t_ns: int
    source: str


@dataclass(slots=True)
class TextChunk:
    """A response chunk. ``text`` may be empty (a role-only chunk): that is not a token.

    ``tokens`` is how many generated tokens the engine says this chunk carries, or
    ``None`` when the engine does not say.

    ``part`` says what the text is: :data:`ANSWER` (the answer's text), :data:`REASONING`
    (the model's thinking, apart from its answer) or :data:`TOOL` (a tool call being
    written: ``name(`` then its arguments as they stream, then ``)``). A tool call is an
    answer: it ends the thinking (TTFO, :mod:`tui.core.metrics`).

    Not frozen, unlike the other events: there is one per token, a frozen dataclass
    costs about 3x as much to build, and a request's timeline keeps the event itself as
    its :class:`~tui.core.timeline.ChunkStamp`. Treat it as read-only all the same.
    """

    t_ns: int
    text: str
    tokens: int | None = None
    part: Part = ANSWER


# EngineTruth's numbers, by name: what a session record's engine_truth may hold (its
# reader checks them, its replay reads them back) besides the source and raw fields.
TRUTH_NUMBERS: Final = (
    "prompt_tokens",
    "prompt_eval_tokens",
    "prompt_ms",
    "output_tokens",
    "decode_tokens",
    "decode_ms",
    "cached_tokens",
    "load_ms",
)


@dataclass(frozen=True, slots=True)
class EngineTruth:
    """The engine's own account of a request, as it reported it (None = not reported).

    prompt_ms / prompt_eval_tokens: prefill time and the tokens actually evaluated in it
    (prefix-cache hits excluded). decode_ms / decode_tokens: generation time and tokens as
    the engine timed them. ``raw`` keeps the engine's fields verbatim.
    """

    prompt_tokens: int | None = None
    prompt_eval_tokens: int | None = None
    prompt_ms: float | None = None
    output_tokens: int | None = None
    decode_tokens: int | None = None
    decode_ms: float | None = None
    cached_tokens: int | None = None
    load_ms: float | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def prefill_tps(self) -> float | None:
        """Engine prefill speed: prompt_eval_tokens / prompt_ms (tokens per second)."""
        n = self.prompt_eval_tokens if self.prompt_eval_tokens is not None else self.prompt_tokens
        if n is None or not self.prompt_ms:
            return None
        return n / self.prompt_ms * 1000.0  # not n / (ms / 1000): a tiny ms underflows to 0

    @property
    def decode_tps(self) -> float | None:
        """Engine decode speed: decode_tokens / decode_ms (tokens per second)."""
        if self.decode_tokens is None or not self.decode_ms:
            return None
        return self.decode_tokens / self.decode_ms * 1000.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            **{name: getattr(self, name) for name in TRUTH_NUMBERS},
            "prefill_tps": self.prefill_tps,
            "decode_tps": self.decode_tps,
            "raw": self.raw,
        }


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the engine reports them (OpenAI ``usage``, Ollama counts, ids).

    ``output_tokens`` counts every generated token, reasoning included;
    ``reasoning_tokens`` is the part of them the engine says was reasoning
    (``completion_tokens_details.reasoning_tokens``, the Responses API's
    ``output_tokens_details.reasoning_tokens``), None where it does not say.
    """

    t_ns: int
    prompt_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class EngineReport:
    """The engine's own timings for this request (see :class:`EngineTruth`)."""

    t_ns: int
    truth: EngineTruth


@dataclass(frozen=True, slots=True)
class ContextFill:
    """How many tokens the engine holds in this sequence's context (its KV cache) right
    now, by its own count, out of ``n_ctx``. In-process llama.cpp: the context's
    ``n_tokens``, emitted at prefill end, every few tokens while decoding, and at the end.
    See :mod:`tui.core.kv` for what the cache costs per token."""

    t_ns: int
    tokens: int
    n_ctx: int


@dataclass(frozen=True, slots=True)
class Finished:
    """The stream ended normally. ``reason``: stop, length, cancelled, tool_calls, or the
    engine's own word (bounded: :func:`engine_word`). ``model``: the model the server's
    answer named (its ``model`` field, bounded: :func:`model_name`), None where it named
    none — an in-process engine, a server that does not say, a stop before it said."""

    t_ns: int
    reason: FinishReason = "stop"
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The stream ended with an error; what streamed before it is kept.

    ``kind`` is a short machine-readable class: connect, http, protocol, timeout, load,
    engine, cancelled, internal (a bug in infertop, not a fault of the engine).
    ``model``: as :attr:`Finished.model`, where the answer named one before it failed.
    """

    t_ns: int
    message: str
    kind: FailureKind = "engine"
    model: str | None = None


StreamEvent = (
    RequestSent
    | FirstByte
    | StampSource
    | TextChunk
    | Usage
    | EngineReport
    | ContextFill
    | Finished
    | Failed
)
