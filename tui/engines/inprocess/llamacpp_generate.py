"""llama.cpp's generation loop (llama-cpp-python), run in the engine's generation thread.

:func:`generate` samples one token at a time with ``Llama.generate`` and stamps it with
``perf_counter_ns`` the moment the token id is returned, before any hand-off (to asyncio,
or to the worker's socket): RequestSent, StampSource, TextChunk per token, ContextFill
every :data:`KV_FILL_EVERY` tokens, Usage, EngineReport (llama.cpp's perf context:
:func:`engine_truth`) and Finished or Failed. Token counts are the token ids generated
(end-of-generation excluded). The engine that loads the model:
:mod:`tui.engines.inprocess.llamacpp`.
"""

from __future__ import annotations

import codecs
import threading
import time
from typing import Any

from tui.core.cancel import CancelToken
from tui.core.events import (
    ContextFill,
    EngineReport,
    EngineTruth,
    Failed,
    Finished,
    OwnReason,
    RequestSent,
    StampSource,
    TextChunk,
    Usage,
)
from tui.engines.base import EngineError, GenerationRequest, ThreadSink

GENERATION_THREAD_STAMPS = "llama.cpp's generation thread, as each token id is returned"
KV_FILL_EVERY = 8  # decode tokens between ContextFill events (plus prefill end and the end)


def generate(
    llm: Any,
    request: GenerationRequest,
    out: ThreadSink,
    stop: threading.Event,
    cancel: CancelToken,
    t_sent: int,
) -> None:
    """Runs in the engine thread: every event after RequestSent is stamped here."""
    import llama_cpp

    now = time.perf_counter_ns
    emit = out.put
    emit(RequestSent(t_sent))
    emit(StampSource(t_sent, GENERATION_THREAD_STAMPS))
    n_out = 0
    prompt_tokens: list[int] = []
    try:
        prompt_tokens = tokenize_prompt(llm, request)
        if len(prompt_tokens) >= llm.n_ctx():
            raise EngineError(
                f"prompt is {len(prompt_tokens)} tokens; the context holds {llm.n_ctx()}"
            )
        max_tokens = min(request.max_tokens, llm.n_ctx() - len(prompt_tokens))
        if not request.cache_prompt:
            llm.reset()
        if request.seed is not None:
            llm.set_seed(request.seed)
        ctx = llm._ctx.ctx
        llama_cpp.llama_perf_context_reset(ctx)
        vocab = llm._model.vocab
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = 0
        reason: OwnReason = "length"
        n_ctx = llm.n_ctx()
        gen = llm.generate(
            prompt_tokens,
            temp=request.temperature,
            top_p=request.top_p,
            reset=True,
        )
        for tok in gen:
            t = now()  # the token exists now
            if stop.is_set() or cancel.cancelled:
                reason = "cancelled"
                break
            if n_out % KV_FILL_EVERY == 0:  # 0: prefill has just ended (the prompt is in)
                emit(ContextFill(t, llm.n_tokens, n_ctx))
            if not request.ignore_eos and llama_cpp.llama_vocab_is_eog(vocab, tok):
                reason = "stop"
                break
            n_out += 1
            pending += 1
            text = decoder.decode(llm.detokenize([tok]))
            if text:
                emit(TextChunk(t, text, pending))
                pending = 0
            if n_out >= max_tokens:
                reason = "length"
                break
        gen.close()
        tail = decoder.decode(b"", final=True)
        if tail or pending:
            emit(TextChunk(now(), tail, pending))
        perf = llama_cpp.llama_perf_context(ctx)
        t_end = now()
        emit(ContextFill(t_end, llm.n_tokens, n_ctx))
        emit(Usage(t_end, len(prompt_tokens), n_out))
        emit(EngineReport(t_end, engine_truth(perf, len(prompt_tokens), n_out)))
        emit(Finished(t_end, reason))
    except EngineError as e:
        emit(Failed(now(), str(e), "engine"))
    except Exception as e:  # noqa: BLE001 - a native fault must end the stream, not the app
        emit(Usage(now(), len(prompt_tokens) or None, n_out))
        emit(Failed(now(), f"llama.cpp failed: {type(e).__name__}: {e}", "engine"))
    finally:
        out.close()


def engine_truth(perf: Any, prompt_tokens: int, n_out: int) -> EngineTruth:
    return EngineTruth(
        prompt_tokens=prompt_tokens,
        prompt_eval_tokens=int(perf.n_p_eval),
        prompt_ms=float(perf.t_p_eval_ms),
        output_tokens=n_out,
        decode_tokens=int(perf.n_eval),
        decode_ms=float(perf.t_eval_ms),
        cached_tokens=max(0, prompt_tokens - int(perf.n_p_eval)),
        source="llama.cpp perf context",
        raw={
            "t_p_eval_ms": float(perf.t_p_eval_ms),
            "n_p_eval": int(perf.n_p_eval),
            "t_eval_ms": float(perf.t_eval_ms),
            "n_eval": int(perf.n_eval),
        },
    )


def tokenize_prompt(llm: Any, request: GenerationRequest) -> list[int]:
    """Format the chat with the model's own template and tokenize it."""
    from llama_cpp import llama_chat_format

    template = (llm.metadata or {}).get("tokenizer.chat_template")
    if template:
        eos_id, bos_id = llm.token_eos(), llm.token_bos()
        fmt = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=llm._model.token_get_text(eos_id) if eos_id != -1 else "",
            bos_token=llm._model.token_get_text(bos_id) if bos_id != -1 else "",
        )
        result = fmt(messages=request.messages)  # type: ignore[arg-type]
        return list(
            llm.tokenize(result.prompt.encode(), add_bos=not result.added_special, special=True)
        )
    text = "".join(f"{m['role']}: {m['content']}\n" for m in request.messages) + "assistant:"
    return list(llm.tokenize(text.encode(), add_bos=True, special=False))
