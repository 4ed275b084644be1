"""A/B of two engines on one machine: in turn, each runs as fast as it does alone; at
once, they slow each other down.

Two in-process llama.cpp engines (each in its own worker process, one thread, the
embedded model) share one core: both workers are pinned to the same CPU, a one-core
machine made explicit (with more threads than cores llama.cpp's spinning threads do not
share a core, they collapse: decode fell to under 1 tok/s in a trial, which would make a
slow test of an obvious point). Per round: each engine alone, an A/B turn as the default
schedule runs it (one after the other), and an A/B turn with ``ab_schedule =
"concurrent"``. The figure is each engine's own decode rate (llama.cpp's perf clock, from
the session log), so it is the engines that slowed, not our stamps. Rounds interleave the
three ways, so drift on the machine touches them alike; the bands are wide (a noisy
shared machine), and the result is a relation, not a speed: in turn ≈ alone, at once
about half (two runnable threads on one core).
"""

from __future__ import annotations

import json
import os
import statistics

import pytest
from app_support import SIZE, gen

CORE = {min(os.sched_getaffinity(0))} if hasattr(os, "sched_getaffinity") else set()
pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not CORE, reason="needs CPU affinity (Linux): the engines share a core"),
]

TWO = "".join(
    f'[engines.{name}]\nkind = "llamacpp"\nmodel = "default"\nn_threads = 1\n'
    for name in ("one", "two")
)
PROMPT = "Write a long story about a lighthouse keeper."
ROUNDS = 3


async def test_ab_in_turn_matches_each_engine_alone_and_at_once_does_not(
    make_config, build_app, wait_for, tmp_path
):
    app = build_app(make_config('default_engine = "one"\n' + gen(48) + TWO))
    modes: list[str] = []  # one entry per session record, in order

    async def turn(mode: str, answers: int) -> None:
        await app.chat.submit_text(PROMPT)
        await wait_for(pilot, lambda: not app.chat.busy, 120)
        await app.chat.action_clear()  # each answer starts from the same context
        modes.extend([mode] * answers)

    async def ready(slot: str) -> None:
        await wait_for(pilot, lambda: app.chat.host(slot).state == "ready", 60)
        info = app.chat.host(slot).info()
        assert info is not None and info.pid not in (None, os.getpid())
        for tid in os.listdir(f"/proc/{info.pid}/task"):  # every thread of the worker
            os.sched_setaffinity(int(tid), CORE)  # (threads it starts later inherit it)

    async with app.run_test(size=SIZE) as pilot:
        await ready("A")
        for _ in range(ROUNDS):
            app.chat.use_engine("A", "one")
            await ready("A")
            await turn("alone", 1)
            app.chat.use_engine("A", "two")
            await ready("A")
            await turn("alone", 1)
            app.chat.action_toggle_ab()  # B = "one"
            await ready("B")
            app.config.ui.ab_schedule = "auto"
            assert app.chat.ab_plan().label == "sequential (shared machine)"
            await turn("in turn", 2)
            app.config.ui.ab_schedule = "concurrent"
            await turn("at once", 2)
            app.chat.action_toggle_ab()
    recs = [json.loads(x) for x in (tmp_path / "session.jsonl").read_text().splitlines()]
    assert len(recs) == len(modes)
    decode: dict[tuple[str, str], list[float]] = {}
    for rec, mode in zip(recs, modes, strict=True):
        assert rec["metrics"]["output_tokens"] == 48, rec["metrics"]
        decode.setdefault((mode, rec["engine"]), []).append(rec["engine_truth"]["decode_tps"])
    # how the turns ran, from the stamps: in turn never overlapping, at once overlapping
    for mode in ("in turn", "at once"):
        pairs = [recs[i : i + 2] for i, m in enumerate(modes) if m == mode][::2]
        for a, b in pairs:
            overlap = min(_end(a), _end(b)) - max(a["t_sent_ns"], b["t_sent_ns"])
            shorter = min(_end(a) - a["t_sent_ns"], _end(b) - b["t_sent_ns"])
            assert (overlap <= 0) if mode == "in turn" else (overlap > shorter / 2), mode
    med = {k: statistics.median(v) for k, v in decode.items()}
    for engine in ("one", "two"):
        alone, in_turn = med[("alone", engine)], med[("in turn", engine)]
        assert 0.7 <= in_turn / alone <= 1.4, med
        assert med[("at once", engine)] / in_turn < 0.8, med  # about 0.5: one core, two


def _end(rec: dict) -> float:  # type: ignore[type-arg]
    return float(rec["t_sent_ns"] + rec["metrics"]["e2e_ms"] * 1e6)
