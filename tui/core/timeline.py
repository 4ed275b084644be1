"""RequestTimeline: the stamped events of one request, in arrival order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.core.events import (
    ANSWER,
    REASONING,
    EndReason,
    EngineReport,
    EngineTruth,
    Failed,
    FailureKind,
    Finished,
    FirstByte,
    Part,
    RequestSent,
    StampSource,
    StreamEvent,
    TextChunk,
    Usage,
    end_reason_of,
    failure_kind_of,
    model_name,
    part_of,
)

# One response chunk: when it arrived, its text, its engine-given token count.
ChunkStamp = TextChunk


@dataclass
class RequestTimeline:
    """Everything measured about one request; metrics are computed from this alone.

    Chunks are kept as parallel lists (arrival stamp, text, engine-given token count, and
    what the text is: answer, reasoning or tool call), not an object per chunk: ints and
    strings are not tracked by the garbage collector, so a bench holding thousands of
    timelines does not make every collection rescan a quarter of a million chunk objects.
    :attr:`chunks` builds the objects. ``chunk_part`` stays empty while every chunk is an
    answer (most streams), and is filled in from the first chunk that is not.
    """

    t_sent_ns: int | None = None
    t_first_byte_ns: int | None = None
    t_end_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)
    chunk_text: list[str] = field(default_factory=list)
    chunk_tokens: list[int | None] = field(default_factory=list)
    chunk_part: list[Part] = field(default_factory=list)
    prompt_tokens: int | None = None
    usage_output_tokens: int | None = None
    usage_reasoning_tokens: int | None = None
    truth: EngineTruth | None = None
    finish_reason: EndReason | None = None
    error: str | None = None
    error_kind: FailureKind | None = None
    stamp_source: str | None = None  # how the stamps were taken (see StampSource)
    # the model the server's answer named (Finished.model / Failed.model), bounded
    response_model: str | None = None

    def add(self, event: StreamEvent) -> None:
        """Record one event. Events must come in the order the engine produced them."""
        if isinstance(event, TextChunk):
            if self.t_first_byte_ns is None:
                self.t_first_byte_ns = event.t_ns
            self.chunk_ns.append(event.t_ns)
            self.chunk_text.append(event.text)
            self.chunk_tokens.append(event.tokens)
            if self.chunk_part:
                self.chunk_part.append(event.part)
            elif event.part != ANSWER:
                before: list[Part] = [ANSWER] * (len(self.chunk_ns) - 1)
                self.chunk_part = [*before, event.part]
        elif isinstance(event, RequestSent):
            self.t_sent_ns = event.t_ns
        elif isinstance(event, FirstByte):
            if self.t_first_byte_ns is None:
                self.t_first_byte_ns = event.t_ns
        elif isinstance(event, StampSource):
            self.stamp_source = event.source
        elif isinstance(event, Usage):
            if event.prompt_tokens is not None:
                self.prompt_tokens = event.prompt_tokens
            if event.output_tokens is not None:
                self.usage_output_tokens = event.output_tokens
            if event.reasoning_tokens is not None:
                self.usage_reasoning_tokens = event.reasoning_tokens
        elif isinstance(event, EngineReport):
            self.truth = event.truth
        elif isinstance(event, Finished):
            self.t_end_ns = event.t_ns
            self.finish_reason = event.reason
            self.response_model = event.model
        elif isinstance(event, Failed):
            self.t_end_ns = event.t_ns
            self.response_model = event.model
            self.error = event.message
            self.error_kind = event.kind
            self.finish_reason = "error"

    @property
    def parts(self) -> list[Part]:
        """What each chunk is (:data:`~tui.core.events.PARTS`), in arrival order."""
        return self.chunk_part or [ANSWER] * len(self.chunk_ns)

    @property
    def chunks(self) -> list[ChunkStamp]:
        """Every chunk, in arrival order (built on each call)."""
        return [
            ChunkStamp(t, x, k, p)
            for t, x, k, p in zip(self.chunk_ns, self.chunk_text, self.chunk_tokens, self.parts)
        ]

    @property
    def text(self) -> str:
        """The answer: the text of every chunk that is not reasoning (tool calls
        included, as ``name(arguments)``)."""
        if not self.chunk_part:
            return "".join(self.chunk_text)
        return "".join(x for x, p in zip(self.chunk_text, self.chunk_part) if p != REASONING)

    @property
    def reasoning_text(self) -> str:
        """The model's thinking, apart from its answer ("" when it showed none)."""
        if not self.chunk_part:
            return ""
        return "".join(x for x, p in zip(self.chunk_text, self.chunk_part) if p == REASONING)

    @property
    def has_reasoning(self) -> bool:
        return REASONING in self.chunk_part

    @property
    def content_chunks(self) -> list[ChunkStamp]:
        """Chunks that carry generated text (role-only / empty chunks excluded)."""
        return [c for c in self.chunks if c.text]

    def content_columns(self) -> tuple[list[int], list[int | None]]:
        """Stamps and token counts of the chunks that carry text (:attr:`content_chunks`
        without building them), of every part."""
        texts = self.chunk_text
        if all(texts):
            return self.chunk_ns, self.chunk_tokens
        keep = [i for i, x in enumerate(texts) if x]
        return [self.chunk_ns[i] for i in keep], [self.chunk_tokens[i] for i in keep]

    def part_columns(self, reasoning: bool) -> tuple[list[int], list[int | None]]:
        """Stamps and token counts of the chunks with text that are reasoning
        (``reasoning=True``) or answer and tool calls (``False``)."""
        if not self.chunk_part:
            return ([], []) if reasoning else self.content_columns()
        keep = [
            i
            for i, (x, p) in enumerate(zip(self.chunk_text, self.chunk_part))
            if x and (p == REASONING) == reasoning
        ]
        return [self.chunk_ns[i] for i in keep], [self.chunk_tokens[i] for i in keep]

    @property
    def done(self) -> bool:
        return self.t_end_ns is not None

    def to_dict(self) -> dict[str, Any]:
        """Raw timeline for logs and reports; times in ns relative to the request start."""
        t0 = self.t_sent_ns or 0

        def rel(t: int | None) -> int | None:
            return None if t is None else t - t0

        chunks: list[list[Any]] = [
            [t - t0, x, k] for t, x, k in zip(self.chunk_ns, self.chunk_text, self.chunk_tokens)
        ]
        for c, p in zip(chunks, self.chunk_part):  # a 4th item only where it is not answer
            if p != ANSWER:
                c.append(p)
        return {
            "t_first_byte_ns": rel(self.t_first_byte_ns),
            "t_end_ns": rel(self.t_end_ns),
            "chunks": chunks,
            "prompt_tokens": self.prompt_tokens,
            "usage_output_tokens": self.usage_output_tokens,
            "usage_reasoning_tokens": self.usage_reasoning_tokens,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "error_kind": self.error_kind,
            "stamp_source": self.stamp_source,
            "response_model": self.response_model,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], truth: EngineTruth | None = None) -> RequestTimeline:
        """Inverse of :meth:`to_dict` (times come back relative to a start at 0)."""
        chunks = d.get("chunks", [])
        parts = [part_of(c[3]) if len(c) > 3 else ANSWER for c in chunks]
        return cls(
            t_sent_ns=0,
            t_first_byte_ns=d.get("t_first_byte_ns"),
            t_end_ns=d.get("t_end_ns"),
            chunk_ns=[int(c[0]) for c in chunks],
            chunk_text=[str(c[1]) for c in chunks],
            chunk_tokens=[c[2] for c in chunks],
            chunk_part=parts if any(p != ANSWER for p in parts) else [],
            prompt_tokens=d.get("prompt_tokens"),
            usage_output_tokens=d.get("usage_output_tokens"),
            usage_reasoning_tokens=d.get("usage_reasoning_tokens"),
            truth=truth,
            finish_reason=end_reason_of(d.get("finish_reason")),
            error=d.get("error"),
            error_kind=failure_kind_of(d.get("error_kind")),
            stamp_source=d.get("stamp_source"),
            response_model=model_name(d.get("response_model")),
        )
