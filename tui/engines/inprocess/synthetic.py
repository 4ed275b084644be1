"""A synthetic in-process engine: streams words at a configured rate.

For demos, tests that need exact timing control, and UI load benchmarks. It is not a
model: the text is a fixed passage cycled word by word. Every chunk carries exactly one
token (engine-counted), stamped with ``time.perf_counter_ns()`` in the generating thread
at the moment it is produced — the same place the llama.cpp engine stamps.

Options (``[engines.NAME.options]``):

- ``tokens_per_s`` (float, default 50): decode pace; chunk i is produced at
  t_first + i / tokens_per_s (deadline-paced, so pacing error does not accumulate).
- ``ttft_ms`` (float, default 20): time from request sent to the first token.
- ``load_ms`` (float, default 0): simulated cold start, spent sleeping in ``load()``.
- ``fail_after`` (int, default none): emit a Failed event after this many tokens.
- ``fail_load`` (str, default none): ``load()`` raises EngineError with this message.
- ``text`` (str): the passage to cycle instead of the built-in one.
- ``load_stderr`` (str): written straight to file descriptor 2 during ``load()``, the way
  llama.cpp's C code logs while a model loads (tests that the UI keeps it off screen).
- ``reasoning_tokens`` (int, default 0): the first N tokens are the model's reasoning
  (REASONING chunks, words of a fixed thought), as a server with a reasoning parser
  streams them; its usage then says N of the tokens were reasoning.
- ``think_tags`` (bool, default false): the reasoning is written into the answer's text
  inside ``<think>`` and ``</think>`` instead, as a server without a reasoning parser
  streams it, and told apart by the same splitter the HTTP engines use
  (tui/engines/dialects/think.py); usage then says nothing of reasoning.
- ``tool_call`` (str, default none): the last four tokens are a call to the tool of this
  name, streamed as TOOL chunks ``name(``, ``{"topic": ``, ``"decode"}``, ``)`` (cut short
  when the reasoning leaves fewer tokens, as a length stop would cut it).

Every token of every part is one engine-counted token: ``max_tokens`` counts them all.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

from tui.core.cancel import CancelToken
from tui.core.events import (
    ANSWER,
    REASONING,
    TOOL,
    EngineReport,
    EngineTruth,
    Failed,
    Finished,
    OwnReason,
    Part,
    RequestSent,
    StampSource,
    StreamEvent,
    TextChunk,
    Usage,
)
from tui.engines.base import EngineError, EngineInfo, GenerationRequest, GeneratorEngine, refused
from tui.engines.dialects.think import CLOSE, OPEN, ThinkSplitter
from tui.transport.handoff import Handoff

PASSAGE = (
    "Prefill reads the whole prompt at once and is bound by compute, while decode "
    "produces one token at a time and is bound by how fast the weights stream from "
    "memory. That is why time to first token grows with the prompt, and why tokens "
    "per second during decode tracks memory bandwidth rather than raw arithmetic."
)
THOUGHT = (
    "The user asks about the two phases of inference. Prefill handles the prompt in one "
    "pass; decode adds one token at a time. I should say what bounds each of them."
)
CALL_ARGUMENTS = ('{"topic": ', '"decode"}')


class SyntheticEngine(GeneratorEngine):
    """Streams a fixed passage at ``tokens_per_s``; see the module docstring."""

    kind = "synthetic"

    def __init__(self, spec) -> None:  # type: ignore[no-untyped-def]
        super().__init__(spec)
        opts = dict(spec.options)
        try:
            self.tokens_per_s = float(opts.pop("tokens_per_s", 50.0))
            self.ttft_ms = float(opts.pop("ttft_ms", 20.0))
            self.load_delay_ms = float(opts.pop("load_ms", 0.0))
            fail_after = opts.pop("fail_after", None)
            self.fail_after = None if fail_after is None else int(fail_after)
            self.reasoning_tokens = int(opts.pop("reasoning_tokens", 0))
        except (TypeError, ValueError) as e:
            raise EngineError(f"engine {spec.name!r}: bad synthetic option: {e}") from None
        self.fail_load = opts.pop("fail_load", None)
        self.load_stderr = opts.pop("load_stderr", None)
        text = str(opts.pop("text", PASSAGE))
        self.think_tags = bool(opts.pop("think_tags", False))
        tool = opts.pop("tool_call", None)
        self.tool_call: tuple[str, ...] = (f"{tool}(", *CALL_ARGUMENTS, ")") if tool else ()
        if opts:
            raise EngineError(
                f"engine {spec.name!r}: unknown synthetic option(s): {', '.join(sorted(opts))}"
            )
        if self.tokens_per_s <= 0:
            raise EngineError(f"engine {spec.name!r}: tokens_per_s must be > 0")
        if self.reasoning_tokens < 0:
            raise EngineError(f"engine {spec.name!r}: reasoning_tokens must be >= 0")
        words = text.split(" ")
        self._words = words or ["?"]
        self._thought = THOUGHT.split(" ")
        self._load_ms: float | None = None

    def _token(self, i: int, words: list[str] | None = None) -> str:
        """Token i: the passage's words in turn; each repeat starts a new paragraph."""
        words = words or self._words
        k = len(words)
        sep = "" if i == 0 else ("\n\n" if i % k == 0 else " ")
        return sep + words[i % k]

    def _part(self, i: int, n: int) -> tuple[Part, str]:
        """Token i of ``n``: (what it is, its text). The reasoning first, then the answer,
        the tool call last (see the module docstring)."""
        r = self.reasoning_tokens
        if i < r:
            return REASONING, self._token(i, self._thought)
        call = max(r, n - len(self.tool_call))
        if self.tool_call and i >= call:
            return TOOL, self.tool_call[i - call]
        return ANSWER, self._token(i - r)

    @classmethod
    def fixed_controls(cls, request: GenerationRequest) -> dict[str, str]:
        return {
            "cache_prompt": "not applicable: no model, no cache",
            "ignore_eos": "enforced: always exactly max_tokens",
        }

    async def load(self) -> float:
        t0 = time.perf_counter()
        if self.load_stderr:
            os.write(2, str(self.load_stderr).encode() + b"\n")
        if self.fail_load:
            raise EngineError(str(self.fail_load))
        if self.load_delay_ms:
            await asyncio.sleep(self.load_delay_ms / 1000.0)
        self._load_ms = (time.perf_counter() - t0) * 1000.0
        return self._load_ms

    def info(self) -> EngineInfo:
        return EngineInfo(
            engine=self.spec.name,
            kind=self.kind,
            model=f"synthetic @ {self.tokens_per_s:g} tok/s",
            context_size=None,
            parameters={"tokens_per_s": self.tokens_per_s, "ttft_ms": self.ttft_ms},
            load_ms=self._load_ms,
            pid=os.getpid(),
        )

    async def events(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        cancel = cancel or CancelToken()
        try:
            request.validate()
        except EngineError as e:
            for event in refused(str(e)):
                yield event
            return
        handoff = Handoff(asyncio.get_running_loop())
        t_sent = time.perf_counter_ns()
        yield RequestSent(t_sent)
        yield StampSource(t_sent, "the synthetic engine's generation thread, as it emits")
        stop = _Either(cancel)
        thread = threading.Thread(
            target=self._produce,
            args=(request, stop, t_sent, handoff),
            daemon=True,
            name=f"synthetic-{request.request_id}",
        )
        thread.start()
        try:
            async with aclosing(handoff.items()) as items:
                async for item in items:
                    yield item
        finally:
            stop.stop()  # the consumer went away early: end the producer too
            await asyncio.to_thread(thread.join, 5.0)

    def _produce(
        self, request: GenerationRequest, cancel: _Either, t_sent: int, out: Handoff
    ) -> None:
        """The generating thread: sleeps to each deadline, stamps, hands the chunk over."""
        put = out.put
        prompt_tokens = sum(len(m.get("content", "").split()) for m in request.messages)
        interval_ns = int(1e9 / self.tokens_per_s)
        t_first_due = t_sent + int(self.ttft_ms * 1e6)
        n = 0
        reason: OwnReason = "length"
        t_first = t_last = None
        n_reasoning = 0
        splitter = ThinkSplitter() if self.think_tags and self.reasoning_tokens else None
        try:
            for i in range(request.max_tokens):
                due = t_first_due + i * interval_ns
                if _sleep_until(due, cancel):
                    reason = "cancelled"
                    break
                if self.fail_after is not None and n >= self.fail_after:
                    put(Failed(time.perf_counter_ns(), "synthetic engine fault (fail_after)"))
                    return
                t = time.perf_counter_ns()
                part, text = self._part(i, request.max_tokens)
                n_reasoning += part == REASONING
                if splitter is None:
                    put(TextChunk(t, text, 1, part))
                else:  # the reasoning in tags, in the answer's text (module docstring)
                    self._tagged(splitter, i, t, part, text, put)
                n += 1
                t_first = t if t_first is None else t_first
                t_last = t
            t_end = time.perf_counter_ns()
            if splitter is not None:
                splitter.flush(t_end, put)
            reasoning = n_reasoning if n_reasoning and splitter is None else None
            put(Usage(t_end, prompt_tokens, n, reasoning))
            decode_ms = None
            if t_first is not None and t_last is not None and n >= 2:
                decode_ms = (t_last - t_first) / 1e6
            put(
                EngineReport(
                    t_end,
                    EngineTruth(
                        prompt_tokens=prompt_tokens,
                        prompt_eval_tokens=prompt_tokens,
                        prompt_ms=self.ttft_ms,
                        output_tokens=n,
                        decode_tokens=None if decode_ms is None else n - 1,
                        decode_ms=decode_ms,
                        source="synthetic (configured ttft, measured decode)",
                    ),
                )
            )
            put(Finished(time.perf_counter_ns(), reason))
        finally:
            out.close()

    def _tagged(
        self, splitter: ThinkSplitter, i: int, t: int, part: str, text: str, put: Put
    ) -> None:
        """Token i as a model without a reasoning parser writes it: the reasoning inside
        ``<think>``…``</think>`` in the answer's text, split apart again by ``splitter``
        (a tool call comes apart from the text, as in every API)."""
        if i == 0:
            text = OPEN + text
        elif i == self.reasoning_tokens:  # the first token after the reasoning
            if part == TOOL:
                splitter.split(t, CLOSE, 0, put)
            else:
                text = CLOSE + "\n\n" + text
        if part == TOOL:
            put(TextChunk(t, text, 1, TOOL))
        else:
            splitter.split(t, text, 1, put)


Put = Callable[[StreamEvent], None]


class _Either:
    """Cancelled when the caller's token is, or when the consumer stopped reading."""

    def __init__(self, token: CancelToken) -> None:
        self._token = token
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    @property
    def cancelled(self) -> bool:
        return self._token.cancelled or self._stopped.is_set()


def _sleep_until(due_ns: int, cancel: _Either) -> bool:
    """Sleep until ``due_ns`` (perf_counter_ns); True when cancelled meanwhile.

    Sleeps in slices of at most 50 ms so a cancel is seen quickly. No spinning: the
    generator must not eat a core (the UI CPU benchmark runs it in-process).
    """
    while True:
        if cancel.cancelled:
            return True
        left = due_ns - time.perf_counter_ns()
        if left <= 0:
            return False
        time.sleep(min(left, 50_000_000) / 1e9)
