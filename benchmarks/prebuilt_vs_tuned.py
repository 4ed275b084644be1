"""What the first minute costs: prefill and decode tok/s of the prebuilt llama.cpp (PyPI's
xllamacpp, generic AVX2) ÷ llama.cpp built for this CPU (llama-cpp-python from the
wheelhouse), on the default model, measured interleaved in one run.

Both engines are infertop's own (kinds ``llamacpp-prebuilt`` and ``llamacpp``), each in
its worker process, loaded once with the same threads and context; requests alternate
between them (P T T P P T ...: the order flips each pair, so neither always runs on a
machine the other just warmed). Each request: the same prompt of ``--prompt-tokens``
tokens, a cold prefill (``cache_prompt`` false), ``--tokens`` tokens with EOS ignored.
The numbers are each engine's own account: prefill = prompt tokens evaluated ÷ llama.cpp's
prompt time; decode = decode tokens ÷ llama.cpp's decode time (llama.cpp's perf context
for the tuned build, the server's ``timings`` for the prebuilt one: the same counters of
the same library). Each request checks its workload happened (tokens generated, prompt
tokens evaluated) or the run stops and says so.

``--smoke`` (seconds): one pair, no warm-up, a 32-token prompt and 8 tokens, the same
checks of each request's workload. Exit 77 where either build is not installed (the
prebuilt one needs a CPU with AVX2; the tuned one is llama-cpp-python from setup.sh --dev).

    .venv/bin/python -m benchmarks.prebuilt_vs_tuned [--pairs 6] [--threads N] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys

from benchmarks import smoke
from tui.core.timeline import RequestTimeline
from tui.engines.base import Engine, EngineSpec, GenerationRequest
from tui.engines.inprocess.llama_builds import PREBUILT_KIND, TUNED_KIND
from tui.engines.registry import create_engine

TEXT = (
    "The river runs past the old mill and under the stone bridge, where children watch the "
    "boats go by in the long summer evenings. "
)


def prompt_of(tokens: int) -> str:
    """About ``tokens`` tokens of text (SmolLM2's tokenizer: ~26 per sentence)."""
    return (TEXT * (tokens // 20 + 1))[: tokens * 4]


async def one(engine: Engine, request: GenerationRequest) -> tuple[float, float, int, int]:
    """(prefill tok/s, decode tok/s, prompt tokens evaluated, tokens generated)."""
    tl = RequestTimeline()
    async for event in engine.stream(request):
        tl.add(event)
    t = tl.truth
    if tl.error or t is None or not t.prompt_ms or not t.decode_ms:
        raise SystemExit(f"{engine.spec.name}: no engine account ({tl.error or t})")
    evaluated, decoded = t.prompt_eval_tokens or 0, t.decode_tokens or 0
    return evaluated / t.prompt_ms * 1000, decoded / t.decode_ms * 1000, evaluated, decoded


def machine() -> str:
    """When, on what, at what load: a result file's first line."""
    from datetime import datetime

    from tui.engines.inprocess.probe import cpu_line

    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    name = cpu_line().split(";")[0]
    return f"{datetime.now():%Y-%m-%d %H:%M}, {name}, {os.cpu_count()} cores; {load}"


def installed() -> None:
    """Skip a smoke run where a build is missing (see the module docstring)."""
    from tui.engines.inprocess.llama_builds import prebuilt_cpu_problem

    problem = prebuilt_cpu_problem()
    if problem is not None:
        smoke.skip(problem)
    for module, build in (("xllamacpp", "the prebuilt llama.cpp"), ("llama_cpp", "the tuned one")):
        try:
            __import__(module)
        except ImportError as e:
            smoke.skip(f"{build} is not installed ({e})")


async def main(args: argparse.Namespace) -> int:
    if args.smoke:
        installed()
        args.pairs, args.prompt_tokens, args.tokens = 1, 32, 8
    print(machine(), flush=True)
    threads = args.threads or os.cpu_count() or 1
    engines = {
        kind: create_engine(
            EngineSpec(name=kind, kind=kind, model="default", n_threads=threads, n_ctx=2048)
        )
        for kind in (PREBUILT_KIND, TUNED_KIND)
    }
    for e in engines.values():
        await e.load()
    request = GenerationRequest.from_prompt(
        prompt_of(args.prompt_tokens),
        max_tokens=args.tokens,
        temperature=0.0,
        cache_prompt=False,
        ignore_eos=True,
    )
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in engines}
    try:
        for kind in engines if not args.smoke else ():  # one warm-up each
            await one(engines[kind], request)
        for pair in range(args.pairs):
            order = (PREBUILT_KIND, TUNED_KIND) if pair % 2 == 0 else (TUNED_KIND, PREBUILT_KIND)
            for kind in order:
                prefill, decode, evaluated, decoded = await one(engines[kind], request)
                want = args.tokens - 1  # the first token comes with the prefill
                if decoded < want - 1 or evaluated < args.prompt_tokens // 2:
                    raise SystemExit(
                        f"{kind}: the workload did not happen: {evaluated} prompt tokens "
                        f"evaluated, {decoded} decoded (asked {args.tokens})"
                    )
                got[kind].append((prefill, decode))
                print(
                    f"pair {pair + 1} {kind:<18} prefill {prefill:7.1f} tok/s ({evaluated} tok)"
                    f"  decode {decode:6.1f} tok/s ({decoded} tok)",
                    flush=True,
                )
    finally:
        for e in engines.values():
            await e.close()
    info = {k: e.info() for k, e in engines.items()}
    print()
    for kind in engines:
        pre = statistics.median(p for p, _ in got[kind])
        dec = statistics.median(d for _, d in got[kind])
        print(f"{info[kind].build}: median prefill {pre:.1f} tok/s, decode {dec:.1f} tok/s")
    pairs = list(zip(got[PREBUILT_KIND], got[TUNED_KIND], strict=True))
    pre_ratios = [p[0] / t[0] for p, t in pairs]
    dec_ratios = [p[1] / t[1] for p, t in pairs]
    print(
        f"prebuilt ÷ tuned, per pair: prefill {', '.join(f'{r:.2f}' for r in pre_ratios)}; "
        f"decode {', '.join(f'{r:.2f}' for r in dec_ratios)}"
    )
    print(
        f"prebuilt ÷ tuned (median of {len(pairs)} interleaved pairs): prefill "
        f"{statistics.median(pre_ratios):.2f}x, decode {statistics.median(dec_ratios):.2f}x"
    )
    print(f"threads {threads}, prompt {args.prompt_tokens} tokens, {args.tokens} generated")
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if args.smoke:
        smoke.check(all(len(got[k]) == args.pairs for k in engines), f"one pair measured: {got}")
        smoke.passed("a pair of requests, each engine's own account read and checked")
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--prompt-tokens", type=int, default=256)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--threads", type=int, help="llama.cpp threads (default: every core)")
    smoke.add_flag(p)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
