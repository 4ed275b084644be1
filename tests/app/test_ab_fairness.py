"""A/B of two engines on one machine: in turn, each has the CPU to itself; at once,
they share it.

Two in-process llama.cpp engines (each in its own worker process, one thread, the
embedded model) share one core: both workers are pinned to the same CPU, a one-core
machine made explicit (with more threads than cores llama.cpp's spinning threads do not
share a core, they collapse: decode fell to under 1 tok/s in a trial, which would make a
slow test of an obvious point). Per round: an A/B turn as the default schedule runs it
(one after the other), and an A/B turn with ``ab_schedule = "concurrent"``.

What is checked holds however busy the machine is (its other work shares that core too,
and comes and goes): how the answers ran, from their stamps (in turn never overlapping,
at once mostly overlapping), and what the *other* engine's worker did while each answer
was being generated, from both workers' CPU time sampled on our clock (/proc, 20 times a
second): in turn it used next to none (this answer had the core to itself as far as the
A/B is concerned: what alone means), at once it used about as much as this one (they
share the core, so each goes at about half its pace). Decode rates themselves swing with
the machine's other load (measured under load here: the same engine alone at 14 and at
23 tok/s in one run) and are left to benchmarks.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from tests.app.app_support import SIZE, gen

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
ROUNDS = 2
SAMPLE_S = 0.05


class WorkerCpu:
    """Each engine's worker CPU time (user + system, s), sampled every SAMPLE_S seconds
    on ``time.perf_counter_ns`` (CLOCK_MONOTONIC: the clock the answers are stamped on)."""

    def __init__(self) -> None:
        self.pids: dict[str, int] = {}
        self.samples: list[tuple[int, dict[str, tuple[int, float]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> WorkerCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _cpu(self, pid: int) -> float | None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / self._tick  # utime, stime

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            now = time.perf_counter_ns()
            got = {n: (pid, self._cpu(pid)) for n, pid in list(self.pids.items())}
            self.samples.append((now, {n: (p, c) for n, (p, c) in got.items() if c is not None}))

    def sampled_both_since(self, t_ns: int) -> bool:
        """Whether a sample taken at or after ``t_ns`` read every worker's CPU time."""
        return any(t >= t_ns and len(s) == len(self.pids) for t, s in self.samples[-3:])

    def used(self, engine: str, t0: int, t1: int) -> float:
        """CPU seconds ``engine``'s worker used from the last sample at or before ``t0`` to
        the first at or after ``t1`` (one worker: a restart in between is an error)."""
        before = [s for t, s in self.samples if t <= t0 and engine in s]
        after = [s for t, s in self.samples if t >= t1 and engine in s]
        assert before and after, f"no CPU samples of {engine} around the answer"
        (pid0, c0), (pid1, c1) = before[-1][engine], after[0][engine]
        assert pid0 == pid1, f"{engine}'s worker changed during an answer"
        return c1 - c0


async def test_ab_in_turn_keeps_the_engines_apart_and_at_once_shares_the_core(
    make_config, build_app, wait_for, tmp_path
):
    app = build_app(make_config('default_engine = "one"\n' + gen(48) + TWO))
    modes: list[str] = []  # one entry per session record, in order

    async def turn(mode: str, answers: int) -> None:
        await app.chat.submit_text(PROMPT)
        await wait_for(pilot, lambda: not app.chat.busy, 180)
        await app.chat.action_clear()  # each answer starts from the same context
        modes.extend([mode] * answers)

    async def ready(slot: str, engine: str) -> None:
        await wait_for(pilot, lambda: app.chat.host(slot).state == "ready", 60)
        info = app.chat.host(slot).info()
        assert info is not None and info.pid not in (None, os.getpid())
        for tid in os.listdir(f"/proc/{info.pid}/task"):  # every thread of the worker
            os.sched_setaffinity(int(tid), CORE)  # (threads it starts later inherit it)
        cpu.pids[engine] = info.pid
        # a sample of this worker before the next answer is sent (its "before" reading)
        now = time.perf_counter_ns()
        await wait_for(pilot, lambda: cpu.sampled_both_since(now), 10)

    with WorkerCpu() as cpu:
        async with app.run_test(size=SIZE) as pilot:
            app.chat.use_engine("A", "two")
            await ready("A", "two")
            app.chat.action_toggle_ab()  # B = "one"
            await ready("B", "one")
            for _ in range(ROUNDS):
                app.config.ui.ab_schedule = "auto"
                assert app.chat.ab_plan().label == "sequential (shared machine)"
                await turn("in turn", 2)
                app.config.ui.ab_schedule = "concurrent"
                await turn("at once", 2)
            # a sample of both workers after the last answer ended (its "after" reading),
            # before closing the app ends them
            now = time.perf_counter_ns()
            await wait_for(pilot, lambda: cpu.sampled_both_since(now), 10)
    recs = [json.loads(x) for x in (tmp_path / "session.jsonl").read_text().splitlines()]
    assert len(recs) == len(modes) == 4 * ROUNDS
    assert {r["engine"] for r in recs} == {"one", "two"}
    for rec in recs:
        assert rec["metrics"]["output_tokens"] == 48, rec["metrics"]
    # how the turns ran, from the stamps: in turn never overlapping, at once overlapping
    for mode in ("in turn", "at once"):
        pairs = [recs[i : i + 2] for i, m in enumerate(modes) if m == mode][::2]
        for a, b in pairs:
            overlap = min(_end(a), _end(b)) - max(a["t_sent_ns"], b["t_sent_ns"])
            shorter = min(_end(a) - a["t_sent_ns"], _end(b) - b["t_sent_ns"])
            assert (overlap <= 0) if mode == "in turn" else (overlap > shorter / 2), mode
    # what the other engine took from this one's core while this one answered
    for rec, mode in zip(recs, modes, strict=True):
        me = rec["engine"]
        other = "two" if me == "one" else "one"
        t0, t1 = rec["t_sent_ns"], int(_end(rec))
        mine, theirs = cpu.used(me, t0, t1), cpu.used(other, t0, t1)
        assert mine > 0.1, (mode, me, mine)  # 48 tokens: most of a CPU second
        if mode == "in turn":
            assert theirs < 0.15 * mine, (mode, me, mine, theirs)  # the core was its own
        else:
            assert theirs > 0.3 * mine, (mode, me, mine, theirs)  # shared (about evenly)


def _end(rec: dict) -> float:  # type: ignore[type-arg]
    return float(rec["t_sent_ns"] + rec["metrics"]["e2e_ms"] * 1e6)
