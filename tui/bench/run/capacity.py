"""``--find-capacity``: the highest arrival rate whose SLO attainment stays at or above the
target, found with probes against the engine (the search itself: tui/bench/run/bracket.py).

Each **probe** is an open-loop level (tui/bench/run/open_loop.py) at one rate, with the
bench's arrival process and workload, sending for ``probe_s`` seconds — or for
:data:`PROBE_MIN_REQUESTS` requests when its schedule holds fewer, so a verdict never
rests on a handful — and giving the requests in flight as long again as it sent for
(then they are cut: not good). Its attainment is tui/bench/stats/slo.py's.

**Early stop on saturation.** A probe stops as soon as its verdict is decided: when the
requests that already cannot be good — ended and not good, or in flight past a limit
they can no longer meet (no first token after ``ttft_ms``, no answer token or tool call
after ``ttfo_ms`` — still thinking —, or running longer than ``e2e_ms``) — outnumber
the misses the target allows out of every planned request (⌊(1 − target) · planned⌋).
A queue that grows without bound gets there quickly: its requests wait past the TTFT
limit. The probes' in-flight counts are in the report.

The search stops when the bracket is tight (hi/lo ≤ 1.15), when it leaves
[0.01, 1000] req/s, or when the next probe (and its drain) would not fit the remaining
``capacity_budget_s``; the report says which.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tui.bench.run.arrivals import schedule
from tui.bench.run.bracket import ProbeResult, SearchBounds, bracket, capacity_result, next_rate
from tui.bench.run.loads import MakeRequest, RequestDriver
from tui.bench.run.open_loop import Live, Watch, run_arrivals
from tui.bench.run.plan import BenchPlan
from tui.bench.run.records import LevelRun
from tui.bench.run.timed_users import run_users_for
from tui.bench.stats.slo import goodput, meets_slo
from tui.core.events import REASONING
from tui.core.timeline import RequestTimeline

PROBE_MIN_REQUESTS = 20


def hopeless(tl: RequestTimeline, slo: dict[str, float], now_ns: int) -> bool:
    """A request in flight that can no longer be good: no generated text after the TTFT
    limit, no answer text (nor tool call) after the TTFO limit, or running past the e2e
    limit (measured from its RequestSent stamp)."""
    if tl.t_sent_ns is None:
        return False
    age_ms = (now_ns - tl.t_sent_ns) / 1e6
    if "e2e_ms" in slo and age_ms > slo["e2e_ms"]:
        return True
    if "ttfo_ms" in slo and age_ms > slo["ttfo_ms"] and not _answered(tl):
        return True
    return "ttft_ms" in slo and age_ms > slo["ttft_ms"] and not any(tl.chunk_text)


def _answered(tl: RequestTimeline) -> bool:
    """Some answer text or tool call has streamed (TTFO is measured)."""
    if not tl.chunk_part:  # every chunk so far is an answer
        return any(tl.chunk_text)
    return any(x and p != REASONING for x, p in zip(tl.chunk_text, tl.chunk_part))


def saturation_watch(slo: dict[str, float], target: float) -> Watch:
    """The watch that stops a probe once it cannot reach ``target`` (module docstring)."""

    def watch(level: LevelRun, live: Live, planned: int) -> str | None:
        allowed = math.floor((1 - target) * planned + 1e-9)
        ended_bad = sum(
            1 for r in level.records if r.status not in ("cancelled",) and not meets_slo(r, slo)
        )
        now = time.perf_counter_ns()
        stuck = sum(1 for _rid, tl in live if hopeless(tl, slo, now))
        if ended_bad + stuck > allowed:
            return (
                f"saturated: {ended_bad + stuck} of {planned} planned requests already miss "
                f"the SLO ({ended_bad} ended, {stuck} in flight past a limit, {len(live)} in "
                f"flight); at most {allowed} may for attainment ≥ {target:g}"
            )
        return None

    return watch


def start_rate(levels: list[LevelRun], plan: BenchPlan) -> float:
    """Where the search starts: the c=1 level's completed requests per second when it
    was measured (one user's pace), else --rate, else 1 req/s."""
    for lv in levels:
        if lv.concurrency == 1 and lv.wall_s:
            ok = sum(1 for r in lv.records if r.ok)
            if ok:
                return float(f"{ok / lv.wall_s:.3g}")
    return plan.rate or 1.0


async def find_capacity(
    driver: RequestDriver,
    make_request: MakeRequest,
    plan: BenchPlan,
    levels: list[LevelRun],
    engine_name: str,
    around_level: Callable[[LevelRun, Callable[[], Awaitable[None]]], Awaitable[None]],
) -> dict[str, Any]:
    """Probe until the search is done; each probe is appended to ``levels`` (so the
    report shows it like any level) and run through ``around_level(level, go)`` (the
    runner's engine-truth scrapes and progress around it)."""
    by_users = plan.capacity_by == "concurrency"
    if by_users:
        bounds = SearchBounds(start_rate=1.0, min_rate=1, max_rate=1024, integer=True)
    else:
        bounds = SearchBounds(start_rate=start_rate(levels, plan))
    unit = "users" if by_users else "req/s"
    probes: list[ProbeResult] = []
    t0 = time.monotonic()
    why = "converged"
    while True:
        rate = next_rate(probes, bounds)
        if rate is None:
            why = _why_done(probes, bounds, unit)
            break
        rate = float(f"{rate:.3g}")
        if any(p.rate == rate for p in probes):
            why = "converged (the next rate rounds to one already probed)"
            break
        duration = plan.probe_s if by_users else max(plan.probe_s, PROBE_MIN_REQUESTS / rate)
        left = plan.capacity_budget_s - (time.monotonic() - t0)
        if 2 * duration > left:
            why = (
                f"budget: the next probe ({rate:g} {unit}, up to {2 * duration:.0f} s) "
                f"would not fit the {left:.0f} s left"
            )
            break
        k = len(probes) + 1
        if by_users:
            level = LevelRun(engine_name, f"probe {k}: c={rate:g}", "probe", concurrency=int(rate))
            go = _users_probe(driver, make_request, level, int(rate), duration)
        else:
            spec = plan.arrival_spec(rate, duration, seed=1000 * k)
            if len(schedule(spec)) < PROBE_MIN_REQUESTS:  # a short draw: send the minimum
                spec = dataclasses.replace(spec, duration_s=None, count=PROBE_MIN_REQUESTS)
            level = LevelRun(engine_name, f"probe {k}: {spec.label()}", "probe", rate=rate)
            go = _rate_probe(driver, make_request, level, spec, duration, plan)
        levels.append(level)
        await around_level(level, go)
        g = goodput(level.records, plan.slo, level.wall_s)
        probes.append(
            ProbeResult(
                rate,
                g["good"],
                g["judged"],
                plan.attainment,
                level.stop_reason,
                g["attainment_low"],
                g["attainment_high"],
                level.label,
                level.wall_s,
            )
        )
        if driver.stopped:
            why = "stopped by the user"
            break
    out = capacity_result(probes, bounds, why, unit)
    out["by"] = plan.capacity_by
    out["search_s"] = time.monotonic() - t0
    out["probe_s"] = plan.probe_s
    out["probe_min_requests"] = PROBE_MIN_REQUESTS
    return out


def _rate_probe(
    driver: RequestDriver,
    make_request: MakeRequest,
    level: LevelRun,
    spec: Any,
    duration: float,
    plan: BenchPlan,
) -> Callable[[], Awaitable[None]]:
    async def go() -> None:
        await run_arrivals(
            driver,
            spec,
            make_request,
            level,
            drain_s=duration,
            watch=saturation_watch(plan.slo, plan.attainment),
        )

    return go


def _users_probe(
    driver: RequestDriver, make_request: MakeRequest, level: LevelRun, c: int, duration: float
) -> Callable[[], Awaitable[None]]:
    async def go() -> None:
        await run_users_for(
            driver, c, duration, duration, make_request, level, min_requests=PROBE_MIN_REQUESTS
        )

    return go


def _why_done(probes: list[ProbeResult], bounds: SearchBounds, unit: str) -> str:
    lo, hi = bracket(probes)
    if lo is None:
        return f"no probe passed down to {bounds.min_rate:g} {unit}"
    if hi is None:
        return f"every probe passed up to {bounds.max_rate:g} {unit}"
    if bounds.integer:
        return f"converged: {lo:g} passed, {hi:g} failed"
    return f"converged: hi/lo = {hi / lo:.3f} ≤ {1 + bounds.rel_tol:g}"
