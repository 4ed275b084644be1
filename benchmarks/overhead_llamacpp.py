"""Decode tok/s through infertop's llama.cpp engine ÷ a bare llama-cpp-python loop.

"Through infertop" is the engine as the app runs it: in its worker process (the tokens
stamped there, then carried to this process over the worker's socket). The bare loop is
llama-cpp-python's own generator in this process, on its own Llama instance of the same
model with the same settings. Same prompt, fixed output length (EOS ignored), greedy, no
prompt-cache reuse; runs alternate (ours, bare, ours, bare, ...) so machine noise hits
both alike, and never overlap. Decode tok/s is (N − 1) / (t_last − t_first) for both.
Goal: median ratio >= 0.98.

    .venv/bin/python -m benchmarks.overhead_llamacpp [--runs 8] [--tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from benchmarks import smoke
from tui.core.metrics import compute_metrics
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.collect import run_request
from tui.engines.inprocess.llamacpp import LlamaCppEngine
from tui.engines.inprocess.llamacpp_generate import tokenize_prompt
from tui.engines.inprocess.worker import WorkerEngine
from tui.engines.registry import create_engine

PROMPT = "Explain in detail how a bicycle works, part by part."


def bare_decode_tps(llm, request: GenerationRequest) -> float:
    """The bare loop: llama-cpp-python's own generator, stamped as tokens arrive."""
    tokens = tokenize_prompt(llm, request)
    llm.reset()
    stamps = []
    gen = llm.generate(tokens, temp=request.temperature, top_p=request.top_p, reset=True)
    for _tok in gen:
        stamps.append(time.perf_counter_ns())
        llm.detokenize([_tok])
        if len(stamps) >= request.max_tokens:
            break
    gen.close()
    if len(stamps) != request.max_tokens:
        raise SystemExit(f"the bare loop made {len(stamps)} tokens, not {request.max_tokens}")
    return (len(stamps) - 1) / ((stamps[-1] - stamps[0]) / 1e9)


async def main(runs: int, n_tokens: int, threads: int) -> None:
    spec = EngineSpec(name="bench", kind="llamacpp", n_threads=threads)
    worker = create_engine(spec)  # as the app makes it: in a worker process
    assert isinstance(worker, WorkerEngine), type(worker)
    await worker.load()
    # in this process: the engine without its worker, and the bare loop on its Llama
    inproc = LlamaCppEngine(spec)
    await inproc.load()
    request = GenerationRequest.from_prompt(
        PROMPT, max_tokens=n_tokens, temperature=0.0, cache_prompt=False, ignore_eos=True
    )
    loop = asyncio.get_running_loop()

    async def through(engine) -> float:  # type: ignore[no-untyped-def]
        m = compute_metrics(await run_request(engine, request))
        if m.output_tokens != n_tokens:
            raise SystemExit(f"{engine.kind} made {m.output_tokens} tokens, not {n_tokens}")
        return float(m.decode_tps)

    async def bare_loop() -> float:
        return await loop.run_in_executor(inproc._executor, bare_decode_tps, inproc._llm, request)

    def arm_of(arms, name):  # type: ignore[no-untyped-def]
        return arms[name]()

    arms = {"worker": lambda: through(worker), "in-process": lambda: through(inproc)}
    arms["bare"] = bare_loop
    results: dict[str, list[float]] = {name: [] for name in arms}
    for arm in arms.values():  # warm-up
        await arm()
    names = list(arms)
    for i in range(runs):
        for k in range(len(names)):  # each run starts with the next arm: no order bias
            name = names[(i + k) % len(names)]
            results[name].append(await arm_of(arms, name))
        print(
            f"run {i + 1}/{runs}: "
            + "   ".join(f"{name} {values[-1]:7.2f}" for name, values in results.items())
            + " tok/s"
        )
    await worker.close()
    await inproc.close()
    bare = results["bare"]
    print(
        "\nmedian decode tok/s: "
        + ", ".join(f"{n} {statistics.median(v):.2f}" for n, v in results.items())
        + f"   ({os.getloadavg()[0]:.2f} load)"
    )
    for name in ("worker", "in-process"):
        ratios = [o / b for o, b in zip(results[name], bare, strict=True)]
        print(
            f"ratio {name}/bare: median {statistics.median(ratios):.4f} "
            f"(min {min(ratios):.4f}, max {max(ratios):.4f}); goal >= 0.98"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    smoke.add_flag(ap)
    a = ap.parse_args()
    if a.smoke:
        a.runs, a.tokens, a.threads = 1, 8, 1
    asyncio.run(main(a.runs, a.tokens, a.threads))
    if a.smoke:  # each arm made exactly its tokens (checked as it ran)
        smoke.passed(f"{a.tokens} tokens per arm: the worker, in-process and the bare loop")
