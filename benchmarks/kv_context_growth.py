"""The KV cache across a conversation: context, KV memory and TTFT, turn by turn.

Runs one conversation twice on the in-process llama.cpp engine, with identical tokens
(temperature 0, ``ignore_eos``, a fixed answer length):

- warm: each turn reuses the cache's matching prefix (``cache_prompt`` on, what chat does):
  only the new tokens are prefilled;
- cold: the context is reset before each turn (``cache_prompt`` off): the whole history is
  prefilled every turn — "when you have a long context, you feel the prefill".

Per turn it prints the prompt tokens, the tokens llama.cpp prefilled (its perf context,
n_p_eval), TTFT, the tokens in context after the turn (the context's n_tokens, from the
ContextFill events) and the KV memory they hold (tui/core/kv.py's formula, from the GGUF's
metadata), as a Markdown table; then the ratios last turn / first turn measured in this run.
It checks the workload happened as intended (the context grows every turn and equals the
prompt plus the answer fed back; cold prefills the whole prompt; warm reuses a prefix) and
exits 1 if not.

    python -m benchmarks.kv_context_growth [--turns 4] [--answer-tokens 24] [--threads 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from benchmarks import smoke
from tui.core.events import ContextFill
from tui.core.kv import KvLayout, state_from_fill
from tui.core.metrics import compute_metrics
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.collect import run_request
from tui.engines.inprocess.llamacpp import LlamaCppEngine

ROOT = Path(__file__).resolve().parents[1]

QUESTIONS = [
    "Explain in a few sentences what a lighthouse keeper did in the nineteenth century.",
    "What dangers did they face during winter storms, and how did they cope with them?",
    "How did the invention of electric lamps and automation change that job over time?",
    "Which famous lighthouses are still standing today, and where can they be visited?",
    "What would a modern visitor learn from staying a night in an old lighthouse?",
    "Summarise everything we discussed so far in three short bullet points, please.",
]


async def conversation(
    engine: LlamaCppEngine, turns: int, answer_tokens: int, warm: bool
) -> list[dict[str, Any]]:
    messages: list[dict[str, str]] = []
    rows = []
    for q in (QUESTIONS * (turns // len(QUESTIONS) + 1))[:turns]:
        messages.append({"role": "user", "content": q})
        request = GenerationRequest(
            messages=list(messages),
            max_tokens=answer_tokens,
            temperature=0.0,
            ignore_eos=True,
            cache_prompt=warm,
        )
        fills: list[ContextFill] = []

        def keep(event: object, fills: list[ContextFill] = fills) -> None:
            if isinstance(event, ContextFill):
                fills.append(event)

        tl = await run_request(engine, request, keep)
        m = compute_metrics(tl)
        if tl.error or not fills or tl.truth is None:
            raise SystemExit(f"turn {len(rows) + 1} failed: {tl.error or 'no ContextFill'}")
        rows.append(
            {
                "prompt": tl.prompt_tokens,
                "prefilled": tl.truth.prompt_eval_tokens,
                "ttft_ms": m.ttft_ms,
                "output": m.output_tokens,
                "context": fills[-1].tokens,
                "n_ctx": fills[-1].n_ctx,
                "n_tokens": engine._llm.n_tokens,
            }
        )
        messages.append({"role": "assistant", "content": tl.text})
    return rows


def table(rows: list[dict[str, Any]], layout: KvLayout, title: str) -> str:
    out = [
        f"**{title}**",
        "",
        "| turn | prompt tok | prefilled tok | TTFT ms | in context after | KV used | fill |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rows, 1):
        kv = state_from_fill(r["context"], r["n_ctx"], layout)
        assert kv.kv_bytes is not None and kv.fill is not None
        out.append(
            f"| {i} | {r['prompt']:,} | {r['prefilled']:,} | {r['ttft_ms']:.0f} "
            f"| {r['context']:,} / {r['n_ctx']:,} | {kv.kv_bytes / 2**20:.2f} MiB "
            f"| {100 * kv.fill:.1f}% |"
        )
    return "\n".join(out)


def check(warm: list[dict[str, Any]], cold: list[dict[str, Any]]) -> list[str]:
    problems = []
    for name, rows in (("warm", warm), ("cold", cold)):
        contexts = [r["context"] for r in rows]
        if contexts != sorted(set(contexts)):
            problems.append(f"{name}: the context did not grow every turn: {contexts}")
        for i, r in enumerate(rows, 1):
            # ignore_eos: every turn stops at the length; its last token is not fed back
            if r["context"] != r["prompt"] + r["output"] - 1 or r["context"] != r["n_tokens"]:
                problems.append(f"{name} turn {i}: context {r['context']} != prompt + answer - 1")
    if any(r["prefilled"] != r["prompt"] for r in cold):
        problems.append("cold: a turn reused a prefix (prefilled < prompt)")
    if not all(r["prefilled"] < r["prompt"] for r in warm[1:]):
        problems.append("warm: a later turn did not reuse the conversation's prefix")
    if [r["prompt"] for r in warm] != [r["prompt"] for r in cold]:
        problems.append("warm and cold conversations differ in their tokens")
    return problems


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kv_context_growth", description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=4, help="turns per conversation (4)")
    parser.add_argument("--answer-tokens", type=int, default=24, help="tokens per answer (24)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (2)")
    parser.add_argument("--n-ctx", type=int, default=2048, help="context size (2048)")
    smoke.add_flag(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one llama.cpp thread: on a busy machine two spin at their barriers
        args.turns, args.answer_tokens, args.threads = 2, 4, 1
    if args.turns < 2 or args.answer_tokens < 2:
        parser.error("--turns and --answer-tokens must be at least 2")
    spec = EngineSpec(
        name="local", kind="llamacpp", model="default", n_threads=args.threads, n_ctx=args.n_ctx
    )
    engine = LlamaCppEngine(spec)
    await engine.load()
    info = engine.info()
    layout = KvLayout.from_dict(info.parameters["kv_layout"])
    try:
        warm = await conversation(engine, args.turns, args.answer_tokens, warm=True)
        cold = await conversation(engine, args.turns, args.answer_tokens, warm=False)
    finally:
        await engine.close()
    print(
        f"{info.model} ({info.quantisation}), n_ctx {args.n_ctx}, {args.threads} threads; "
        f"KV {layout.bytes_per_token / 1024:.1f} KiB/token = {layout.n_layers} layers × 2 (K, V)"
        f" × {layout.n_kv_heads} kv heads × {layout.head_dim_k} × 2 B ({layout.cache_type})\n"
    )
    print(table(warm, layout, "warm (prefix reused, as in chat)"))
    print()
    print(table(cold, layout, "cold (context reset each turn)"))
    print()
    growth = warm[-1]["context"] / warm[0]["context"]
    print(
        f"last / first turn, measured in this run: context {growth:.2f}×;"
        f" TTFT cold {cold[-1]['ttft_ms'] / cold[0]['ttft_ms']:.2f}×,"
        f" warm {warm[-1]['ttft_ms'] / warm[0]['ttft_ms']:.2f}×;"
        f" last turn cold / warm TTFT {cold[-1]['ttft_ms'] / warm[-1]['ttft_ms']:.2f}×"
    )
    problems = check(warm, cold)
    for p in problems:
        print(f"WORKLOAD CHECK FAILED: {p}")
    if args.smoke and not problems:
        smoke.passed(f"{args.turns} turns warm and cold, the context grew as the tokens say")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
