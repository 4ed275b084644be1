"""Run inside the vLLM venv: drive the in-process vLLM engine, print one JSON result.

    PYTHONPATH=REPO VENV/bin/python tests/support/vllm_inprocess_check.py MODEL_DIR

(``tui`` from the repository: the vLLM venv does not have infertop installed.)

tests/http/test_vllm_inprocess.py runs this (the main venv has no vLLM) and checks it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from tui.core.cancel import CancelToken
from tui.core.events import TextChunk
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.registry import create_engine


async def main(model: str) -> dict[str, Any]:
    spec = EngineSpec(name="v", kind="vllm-inprocess", model=model, n_ctx=1024)
    engine = create_engine(spec)
    load_ms = await engine.load()
    try:
        req = GenerationRequest.from_prompt(
            "Tell me about the moon.", max_tokens=16, temperature=0.0, ignore_eos=True
        )
        tl = RequestTimeline()
        chunk_tokens = []
        async for ev in engine.stream(req):
            tl.add(ev)
            if isinstance(ev, TextChunk):
                chunk_tokens.append(ev.tokens)
        m = compute_metrics(tl)
        cancel = CancelToken()
        n = 0
        last = None
        long_req = GenerationRequest.from_prompt(
            "Count to a thousand.", max_tokens=500, ignore_eos=True
        )
        async for ev in engine.stream(long_req, cancel):
            last = ev
            if isinstance(ev, TextChunk):
                n += 1
                if n == 3:
                    cancel.cancel()
        return {
            "load_ms": load_ms,
            "worker_pid": engine.info().pid,
            "own_pid": os.getpid(),
            "metrics": m.to_dict(with_lists=False),
            "chunk_tokens": chunk_tokens,
            "truth": tl.truth.to_dict() if tl.truth else None,
            "text": tl.text,
            "cancel_end": type(last).__name__,
            "cancel_reason": getattr(last, "reason", None),
            "cancel_chunks": n,
        }
    finally:
        await engine.close()


if __name__ == "__main__":
    print("RESULT " + json.dumps(asyncio.run(main(sys.argv[1]))), flush=True)
