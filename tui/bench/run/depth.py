"""Context depth: the bench's question asked with D tokens of prior context before it.

*Prior context* is one earlier exchange in the same chat request, before the question:
a user turn of numbered filler notes (``"Context 000123. Notes to keep in mind: ..."``,
distinct per request from its first words, so no prefix cache can serve it) and a fixed
assistant reply ("Noted."). The question is the bench prompt itself (tui.bench.run.prompts).

*Depth* D is counted by the engine, as prompt length is: D = the engine's prompt tokens
for the whole request − its prompt tokens for the question alone (the calibrated bench
prompt). The two extra turns' chat-template tokens are part of the context. The filler
length is calibrated per engine and depth (engine tokenizer or 1-token usage probes, as
for the prompt); depth 0 is the question alone.

Each depth is a level of ``runs`` requests at concurrency 1 (label ``depth=D``; depth 0
is the bench's c=1 level when it has one, which asks exactly that), measured like any
other: TTFT includes the prefill of the whole context (prompt caching is off), decode
tok/s is the decode rate with that much context in the KV cache.

A depth the engine's context cannot hold (D + prompt tokens + max tokens > n_ctx) is
refused before any request: from the plan (a preset's n_ctx, an in-process engine's
configured n_ctx) with exit status 2, else as soon as the engine reports its n_ctx.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tui.bench.run.loads import RequestDriver, prompt_counter, run_concurrency
from tui.bench.run.plan import BenchError, BenchPlan, check_fits
from tui.bench.run.prompts import WORDS_PER_TOKEN_GUESS, PromptShape, calibrate, filler
from tui.bench.run.records import DepthContext, LevelRun
from tui.core.pauses import settle_heap, streaming
from tui.engines.base import Engine, EngineSpec, GenerationRequest
from tui.engines.kinds import find_kind

if TYPE_CHECKING:
    from tui.bench.run.results import EngineRun

ASSISTANT_REPLY = "Noted."
CONTEXT_COUNTS = 8  # calibration counts per depth (tokenizer or 1-token probes)


def context_text(index: int, n_words: int) -> str:
    """The prior user turn of request ``index``: numbered, then ``n_words`` filler words."""
    return f"Context {index:06d}. Notes to keep in mind: {filler(n_words)}"


def with_context(
    request: GenerationRequest, context: str | None, question: str
) -> GenerationRequest:
    """``request`` asking ``question`` after one earlier exchange (None: no context)."""
    if context is None:
        request.messages = [{"role": "user", "content": question}]
    else:
        request.messages = [
            {"role": "user", "content": context},
            {"role": "assistant", "content": ASSISTANT_REPLY},
            {"role": "user", "content": question},
        ]
    return request


def parse_depths(text: str) -> list[int]:
    """ "0,1024,4096" -> [0, 1024, 4096]; sorted, duplicates removed; BenchError else."""
    levels: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not (part.isascii() and part.isdigit()):
            raise BenchError(
                f"--depth {text!r} does not parse: expected token counts >= 0 separated "
                "by commas, e.g. 0,1024,4096"
            )
        levels.append(int(part))
    return sorted(set(levels))


def depths_refused(plan: BenchPlan, run: EngineRun) -> str | None:
    """Why the engine is refused before any request (also its ``run.error``): its n_ctx
    cannot hold the deepest depth; None when it can, or when it does not say its n_ctx
    (a warning on the run then)."""
    n_ctx = run.info.get("context_size")
    if not isinstance(n_ctx, int):
        run.warnings.append(
            f"{run.name} does not report its context size: --depth was not checked "
            "against it (a request that does not fit fails)"
        )
        return None
    try:
        check_fits(plan.depths, plan.prompt_tokens, plan.max_tokens, n_ctx, run.name)
    except BenchError as e:
        run.error = str(e)
        return run.error
    return None


def check_spec_contexts(plan: BenchPlan, specs: list[EngineSpec]) -> None:
    """Before anything runs: engines whose n_ctx their spec sets (in-process llama.cpp)
    must hold the deepest depth. Servers are checked once they report their n_ctx."""
    for spec in specs:
        n_ctx = plan.n_ctx or spec.n_ctx  # a preset's n_ctx is set on the engines it starts
        kind = find_kind(spec.kind)
        if kind is not None and kind.n_ctx_from_spec and n_ctx:
            check_fits(plan.depths, plan.prompt_tokens, plan.max_tokens, n_ctx, spec.name)


MakeText = Callable[[str], GenerationRequest]


class DepthSweep:
    """Runs the depth levels of one engine (called by the bench runner after its loads).

    ``make_request(text)`` builds a bench request (max tokens, temperature, no prompt
    cache, ignore_eos) asking ``text``; its messages are replaced here.
    """

    def __init__(
        self,
        engine: Engine,
        run: EngineRun,
        driver: RequestDriver,
        make_request: MakeText,
        seed: int,
        on_stage: Callable[[str], None],
    ) -> None:
        self.engine, self.run, self.driver = engine, run, driver
        self.make_request, self.seed, self.on_stage = make_request, seed, on_stage

    async def context_for(self, depth: int, shape: PromptShape, level: str) -> DepthContext:
        question = shape.text(0)
        if depth == 0:
            n = shape.counted_tokens
            return DepthContext(0, level, 0, n, n, shape.method)
        if shape.counted_tokens is None:
            # the engine counts nothing: the depth, like the prompt, is an estimate
            words = max(1, round(depth * WORDS_PER_TOKEN_GUESS))
            return DepthContext(depth, level, words, None, None, "estimate")
        count, method = await prompt_counter(self.engine, self.driver, self.run.calibration)
        found = await calibrate(
            shape.counted_tokens + depth,
            self._context_request(question),
            count,
            method,
            CONTEXT_COUNTS,
            text=context_text,
        )
        return DepthContext(
            depth,
            level,
            found.n_words,
            shape.counted_tokens,
            found.counted_tokens,
            found.method,
            found.probes,
        )

    def _context_request(self, question: str) -> MakeText:
        def make(context: str) -> GenerationRequest:
            return with_context(self.make_request(question), context, question)

        return make

    async def run_all(self, depths: list[int], runs: int) -> None:
        shape = self.run.prompt
        assert shape is not None
        for depth in depths:
            if self.driver.stopped:
                return
            if depth == 0 and (c1 := self.c1_level()) is not None:
                # the c=1 level already asked the question alone, one request at a time
                self.run.depth_contexts.append(await self.context_for(0, shape, c1.label))
                continue
            self.on_stage(f"depth={depth}: calibrating" if depth else "depth=0")
            ctx = await self.context_for(depth, shape, f"depth={depth}")
            if self.driver.stopped:
                return
            self.run.depth_contexts.append(ctx)
            self._warn(ctx)
            settle_heap()
            self.on_stage(ctx.level)
            level = LevelRun(self.run.name, ctx.level, "depth", concurrency=1)
            self.run.depth_levels.append(level)  # listed before it runs (checkpoints)
            with streaming():
                await run_concurrency(self.driver, 1, runs, self._maker(ctx, shape), level)
            self.driver.level_ended()

    def c1_level(self) -> LevelRun | None:
        """The engine's complete concurrency-1 level, when the bench measured one."""
        return next(
            (
                lv
                for lv in self.run.levels
                if lv.concurrency == 1 and lv.kind == "concurrency" and lv.complete
            ),
            None,
        )

    def _maker(self, ctx: DepthContext, shape: PromptShape) -> Callable[[int], GenerationRequest]:
        def make(i: int) -> GenerationRequest:
            question = shape.text(i)
            context = context_text(i, ctx.n_words) if ctx.depth else None
            req = with_context(self.make_request(question), context, question)
            req.seed = self.seed + i
            return req

        return make

    def _warn(self, ctx: DepthContext) -> None:
        got = ctx.counted_depth
        if ctx.depth and got is None:
            self.run.warnings.append(
                f"{self.run.name} counts no prompt tokens: depth {ctx.depth} is an estimate"
            )
        elif got is not None and abs(got - ctx.depth) > max(2, ctx.depth // 50):
            self.run.warnings.append(
                f"{self.run.name}: closest context found for depth {ctx.depth} is {got} tokens"
            )
