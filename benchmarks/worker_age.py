"""Does an engine worker that has answered before decode slower than a fresh one?

watch_cost.py found the TUI's engine worker, with the app frozen (SIGSTOPped) while it
decodes, ~7 % slower than a headless ``infertop run`` (issue 19). The app was not running,
so the gap is between a long-lived worker in a TUI and a fresh process per answer. This
script splits that, without a terminal: the embedded SmolLM2 (llama.cpp in infertop's
worker process, every core), the same prompt, greedy, ``--tokens`` tokens, three arms
rotating each round, each answer after ``REST_S`` at rest:

fresh run   ``infertop run --json``: a new process, a new worker, a fresh model load;
            watch_cost's headless arm.
new core    a new ChatCore in this (long-lived) process: a new worker and model load,
            one answer, closed. Differs from "fresh run" only in the parent process.
kept core   one ChatCore for the whole run: the same worker answers every round, the
            conversation cleared before each (as Ctrl+L does in the TUI).

The figure is the engine's own decode rate (llama.cpp's perf clock: t_eval ÷ n_eval), per
round, then the median; each arm ÷ "fresh run" in the same round.

    .venv/bin/python -m benchmarks.worker_age [--rounds 8] [--tokens 256]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import smoke
from benchmarks.watch_cost import PROMPT, headless  # the same headless arm
from tui.chat.core import ChatCore
from tui.config import load_config
from tui.engines.base import GenerationRequest

ROOT = Path(__file__).resolve().parents[1]

REST_S = 2.0
ARMS = ("fresh run", "new core", "kept core")


def config_text(tmp: Path, tokens: int, threads: int | None = None) -> str:
    return (
        f'default_engine = "local"\nsession_dir = "{tmp / "sessions"}"\n'
        f"[generation]\nmax_tokens = {tokens}\ntemperature = 0.0\nseed = 1\n"
        '[engines.local]\nkind = "llamacpp"\nmodel = "default"\n'
        + (f"n_threads = {threads}\n" if threads else "")
    )


class Core:
    """A ChatCore with the embedded engine loaded, answering as run does."""

    def __init__(self, cfg: Any, tokens: int) -> None:
        self.cfg, self.tokens = cfg, tokens
        self.core = ChatCore(cfg, lambda event: None, initial="local")

    async def load(self) -> None:
        await self.core.host("local").load()

    async def answer(self) -> float:
        self.core.clear()
        request = GenerationRequest.from_prompt(
            PROMPT,
            max_tokens=self.tokens,
            temperature=0.0,
            top_p=self.cfg.generation.top_p,
            seed=1,
        )
        await self.core.run_turn(self.core.start_turn(PROMPT, {"A": request}))
        live = self.core.live["A"]
        truth = live.timeline.truth if live is not None else None
        value = truth.to_dict().get("decode_tps") if truth is not None else None
        return float(value) if value else math.nan

    async def close(self) -> None:
        await self.core.close()


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        path = tmp / "cfg.toml"
        path.write_text(config_text(tmp, args.tokens, 1 if args.smoke else None))
        cfg = load_config(path)
        kept = Core(cfg, args.tokens)
        await kept.load()
        got: dict[str, list[float]] = {a: [] for a in ARMS}
        try:
            for r in range(args.rounds):
                for arm in ARMS[r % 3 :] + ARMS[: r % 3]:
                    await asyncio.sleep(args.rest_s)
                    if arm == "fresh run":
                        got_tps = await asyncio.to_thread(headless, path, tmp, args.tokens)
                        value = got_tps or math.nan
                    elif arm == "new core":
                        new = Core(cfg, args.tokens)
                        try:
                            await new.load()
                            await asyncio.sleep(args.rest_s)
                            value = await new.answer()
                        finally:
                            await new.close()
                    else:
                        value = await kept.answer()
                    got[arm].append(value)
                print(
                    f"round {r + 1}: "
                    + "  ".join(f"{a} {got[a][-1]:.1f}" for a in ARMS)
                    + f" tok/s   load avg {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        finally:
            await kept.close()
    if args.smoke:  # every arm's answer came with llama.cpp's own decode rate
        smoke.check(all(not math.isnan(v) for a in ARMS for v in got[a]), f"an arm failed: {got}")
    base = got["fresh run"]
    print(f"\nengine decode (llama.cpp's clock), median of {args.rounds} rounds:")
    for arm in ARMS:
        ratios = [a / b for a, b in zip(got[arm], base, strict=True)]
        ok = [x for x in ratios if not math.isnan(x)]
        print(
            f"  {arm:>9}: {statistics.median(got[arm]):.1f} tok/s; ÷ fresh run (same round) "
            f"median {statistics.median(ok) if ok else math.nan:.3f} "
            f"(rounds {' '.join(f'{x:.2f}' for x in ratios)})"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=256)
    smoke.add_flag(ap)
    args = ap.parse_args()
    args.rest_s = REST_S
    if args.smoke:
        args.rounds, args.tokens, args.rest_s = 1, 8, 0.1
    started = time.monotonic()
    asyncio.run(main_async(args))
    print(f"({time.monotonic() - started:.0f} s)")
    if args.smoke:
        smoke.passed(f"{args.tokens} tokens in each of the three arms, each with its decode rate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
