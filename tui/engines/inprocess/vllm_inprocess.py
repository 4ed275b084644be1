"""vLLM in-process (AsyncLLM), behind the ``vllm`` extra.

vLLM pins torch and much else, so this engine is for an environment built for vLLM. The
engine core runs in vLLM's own process; its outputs arrive in an AsyncLLM that this
engine runs on a dedicated thread and event loop, where each output is stamped with
``perf_counter_ns`` as it arrives (the consumer's pace cannot move the stamps).

Token counts are exact: every delta output carries its token ids. Engine truth comes
from vLLM's per-request stats (``RequestOutput.metrics``, engine-core monotonic times):
prefill = first_token_ts − scheduled_ts, decode = last_token_ts − first_token_ts over
N − 1 tokens, queue = scheduled_ts − queued_ts.

Spec: ``model`` = a Hugging Face model folder or name; ``n_ctx`` = max_model_len;
options: dtype ("bfloat16"), enforce_eager (true), gpu_memory_utilization.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from tui.core.cancel import CancelToken
from tui.core.events import (
    EngineReport,
    EngineTruth,
    Failed,
    Finished,
    RequestSent,
    StampSource,
    StreamEvent,
    TextChunk,
    Usage,
    engine_word,
)
from tui.engines.base import (
    EngineError,
    EngineInfo,
    EngineSpec,
    GenerationRequest,
    GeneratorEngine,
    refused,
)
from tui.transport.reader_loop import Emit, LoopThread, relay


def truth_from_stats(
    stats: Any, prompt_tokens: int, n_out: int, cached: int | None
) -> EngineTruth | None:
    """EngineTruth from vLLM's RequestStateStats (None when vLLM kept no stats)."""
    if stats is None or not getattr(stats, "first_token_ts", 0):
        return None
    sched, first = float(stats.scheduled_ts), float(stats.first_token_ts)
    last, queued = float(stats.last_token_ts), float(stats.queued_ts)
    return EngineTruth(
        prompt_tokens=prompt_tokens,
        prompt_eval_tokens=prompt_tokens - (cached or 0),
        prompt_ms=(first - sched) * 1000 if sched else None,
        output_tokens=n_out,
        decode_tokens=max(n_out - 1, 0),
        decode_ms=(last - first) * 1000 if last >= first else None,
        cached_tokens=cached,
        source="vllm request stats",
        raw={
            "queue_ms": (sched - queued) * 1000 if queued and sched else None,
            "first_token_latency_s": float(getattr(stats, "first_token_latency", 0.0)),
        },
    )


class VLLMInProcessEngine(GeneratorEngine):
    kind: ClassVar[str] = "vllm-inprocess"

    def __init__(self, spec: EngineSpec) -> None:
        super().__init__(spec)
        if not spec.model:
            raise EngineError(f"engine {spec.name!r}: vllm-inprocess needs a model")
        self._loop: LoopThread | None = None
        self._llm: Any = None
        self._tokenizer: Any = None
        self.load_ms: float | None = None

    async def load(self) -> float:
        try:
            import vllm  # noqa: F401
        except ImportError as e:
            raise EngineError(
                f"vLLM is not installed (pip install 'infertop[vllm]'): {e}"
            ) from None
        if self._loop is None:
            self._loop = LoopThread("infertop-vllm")
        t0 = time.perf_counter_ns()
        await self._loop.call(self._start())
        self.load_ms = (time.perf_counter_ns() - t0) / 1e6
        return self.load_ms

    async def _start(self) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        o = self.spec.options
        args = AsyncEngineArgs(
            model=str(self.spec.model),
            max_model_len=self.spec.n_ctx,
            dtype=str(o.get("dtype", "bfloat16")),
            enforce_eager=bool(o.get("enforce_eager", True)),
            gpu_memory_utilization=float(o.get("gpu_memory_utilization", 0.9)),
        )
        try:
            self._llm = AsyncLLM.from_engine_args(args)
        except Exception as e:  # noqa: BLE001 - vLLM raises many kinds; the user needs one line
            raise EngineError(f"vLLM could not start {self.spec.model}: {e}") from None
        self._tokenizer = self._llm.get_tokenizer()

    async def close(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.shutdown()
        if self._loop is not None:
            self._loop.stop()
            self._loop = None

    @classmethod
    def fixed_controls(cls, request: GenerationRequest) -> dict[str, str]:
        return {
            "cache_prompt": "not enforced: vLLM's prefix caching is an engine setting",
            "ignore_eos": "sent (SamplingParams.ignore_eos)"
            if request.ignore_eos
            else "off: generation stops at end-of-generation",
        }

    def info(self) -> EngineInfo:
        return EngineInfo(
            engine=self.spec.name,
            kind=self.kind,
            model=str(self.spec.model),
            context_size=self.spec.n_ctx,
            load_ms=self.load_ms,
            parameters={"dtype": self.spec.options.get("dtype", "bfloat16")},
        )

    async def events(
        self, request: GenerationRequest, cancel: CancelToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        try:
            request.validate()
            if self._llm is None or self._loop is None:
                raise EngineError("engine is not loaded")
        except EngineError as e:
            for event in refused(str(e)):
                yield event
            return

        async def run(emit: Emit) -> None:
            await self._generate(request, emit)

        async for ev in relay(self._loop, run, cancel):
            yield ev

    async def _generate(self, request: GenerationRequest, emit: Emit) -> None:
        """On the engine loop: every output is stamped the moment it is received."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        prompt = self._tokenizer.apply_chat_template(
            request.messages, tokenize=False, add_generation_prompt=True
        )
        params = SamplingParams(
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
            seed=request.seed,
            ignore_eos=request.ignore_eos,
            output_kind=RequestOutputKind.DELTA,
        )
        t_sent = time.perf_counter_ns()
        emit(RequestSent(t_sent))
        emit(StampSource(t_sent, "vLLM's outputs, as each arrives on the engine's own loop"))
        n_out, pending, prompt_n, reason = 0, 0, 0, "stop"
        last: Any = None
        try:
            async for out in self._llm.generate(prompt, params, request.request_id):
                t = time.perf_counter_ns()
                last = out
                c = out.outputs[0]
                k = len(c.token_ids)
                n_out += k
                pending += k
                if c.text:
                    emit(TextChunk(t, c.text, pending))
                    pending = 0
                prompt_n = len(out.prompt_token_ids or [])
                if out.finished:
                    reason = c.finish_reason or "stop"
                    t_end = t
                    break
            else:
                t_end = time.perf_counter_ns()
        except Exception as e:  # noqa: BLE001 - an engine fault ends this stream only
            emit(Usage(time.perf_counter_ns(), prompt_n or None, n_out))
            emit(Failed(time.perf_counter_ns(), f"vLLM failed: {type(e).__name__}: {e}", "engine"))
            return
        emit(Usage(t_end, prompt_n, n_out))
        truth = truth_from_stats(
            getattr(last, "metrics", None),
            prompt_n,
            n_out,
            getattr(last, "num_cached_tokens", None),
        )
        if truth is not None:
            emit(EngineReport(t_end, truth))
        emit(Finished(t_end, engine_word(reason) or "stop"))
