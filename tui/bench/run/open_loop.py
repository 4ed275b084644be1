"""Open-loop levels: requests sent on an arrival schedule, whether or not earlier ones ended.

:func:`run_arrivals` sends one request at each offset of an
:class:`~tui.bench.run.arrivals.ArrivalSpec`'s schedule (measured from the level's
start on the system-wide monotonic clock), then waits for the requests in flight.

**Duration limit and cut requests.** With ``duration_s`` set, no request is sent after
it; the requests in flight then have ``drain_s`` more seconds to end (with a count
limit instead, ``drain_s`` runs from the last arrival; None: no limit). Any still in flight
after that are cancelled and recorded with status ``"cut"``: they count among the level's
requests, as not good (they did not complete), and their tokens are not counted. A
``watch`` callback (called every :data:`WATCH_S` seconds with the level and the requests
in flight) may stop a level early with a reason: sending stops, the requests in flight
are cut, and ``level.stop_reason`` says why (a capacity probe whose verdict is already
decided: tui/bench/run/capacity.py).

``level.arrivals`` keeps the spec, the schedule (offsets, s), the request index of each
arrival sent, the level's start (seconds since the bench's t0, as records' times are) and
samples of the number in flight, so the report can check what was sent against what
was asked (tui/bench/stats/arrivals.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tui.bench.run.arrivals import ArrivalSpec, schedule
from tui.bench.run.loads import STOP_POLL_S, MakeRequest, RequestDriver
from tui.bench.run.records import LevelRun
from tui.core.timeline import RequestTimeline

WATCH_S = 0.25  # how often a watch callback looks at the requests in flight
Live = list[tuple[str, RequestTimeline]]
Watch = Callable[[LevelRun, Live, int], "str | None"]


async def run_arrivals(
    driver: RequestDriver,
    spec: ArrivalSpec,
    make_request: MakeRequest,
    level: LevelRun,
    *,
    drain_s: float | None = None,
    watch: Watch | None = None,
) -> LevelRun:
    """Send the level's requests on ``spec``'s schedule (records go into ``level``).

    ``watch(level, live, planned)`` returns a reason to stop the level, or None. ``live``
    holds only this level's requests in flight; ``planned`` is the schedule's length."""
    offsets = schedule(spec)
    start_ns = time.perf_counter_ns()
    sent_index: list[int] = []
    in_flight: list[tuple[float, int]] = []
    level.arrivals = {
        "spec": spec.to_dict(),
        "scheduled": offsets,
        "sent_index": sent_index,
        "start_s": (start_ns - driver.t0_ns) / 1e9,
        "drain_s": drain_s,
        "in_flight": in_flight,
    }
    ids: set[str] = set()
    tasks: list[asyncio.Task[None]] = []
    stop_reason: list[str] = []

    async def one(i: int) -> None:
        req = make_request(i)
        ids.add(req.request_id)
        await driver.run(req, "warm", level.label, i, rate=spec.rate, into=level.records)

    def mine() -> Live:
        return [(rid, tl) for rid, tl in driver.live() if rid in ids]

    async def watcher() -> None:
        while True:
            await asyncio.sleep(WATCH_S)
            live = mine()
            in_flight.append(((time.perf_counter_ns() - start_ns) / 1e9, len(live)))
            if watch is not None and not stop_reason:
                why = watch(level, live, len(offsets))
                if why:
                    stop_reason.append(why)
                    for rid, _tl in live:
                        driver.cancel_request(rid)

    watching = asyncio.create_task(watcher())
    try:
        for off in offsets:
            due = start_ns + int(off * 1e9)
            while not (driver.stopped or stop_reason):
                wait = (due - time.perf_counter_ns()) / 1e9
                if wait <= 0:
                    break
                await asyncio.sleep(min(wait, STOP_POLL_S))
            if driver.stopped or stop_reason:
                break
            i = driver.next_index()
            sent_index.append(i)
            tasks.append(asyncio.create_task(one(i)))
        end_ns = None
        if drain_s is not None and offsets:
            limit = spec.duration_s if spec.duration_s is not None else offsets[-1]
            end_ns = start_ns + int((limit + drain_s) * 1e9)
        await _drain(tasks, end_ns, lambda: bool(stop_reason), driver, mine)
    finally:
        watching.cancel()
        try:
            await watching
        except asyncio.CancelledError:
            pass
    cut = not driver.stopped  # a user's Ctrl-C cancels; a limit or a probe verdict cuts
    for r in level.records:
        if r.status == "cancelled" and cut:
            r.status = "cut"
    level.stop_reason = stop_reason[0] if stop_reason else None
    level.complete = not driver.stopped
    return level


async def _drain(
    tasks: list[asyncio.Task[None]],
    end_ns: int | None,
    stopped_early: Callable[[], bool],
    driver: RequestDriver,
    mine: Callable[[], Live],
) -> None:
    """Wait for the level's requests; past ``end_ns`` (the duration limit + drain) or
    once the level was stopped early, cut those still in flight."""
    pending = set(tasks)
    while pending:
        if stopped_early() or (end_ns is not None and time.perf_counter_ns() >= end_ns):
            for rid, _tl in mine():
                driver.cancel_request(rid)
        _done, pending = await asyncio.wait(pending, timeout=STOP_POLL_S)
    await asyncio.gather(*tasks)  # re-raise anything a task raised
