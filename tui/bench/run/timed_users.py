"""A closed-loop level limited by time: c users, each sending its next request as soon
as its last one ended, until ``duration_s`` has passed since the level began and at
least ``min_requests`` were sent (a capacity probe by concurrency:
tui/bench/run/capacity.py). Requests still in flight ``drain_s`` after the last send
are cancelled and recorded as ``"cut"``, as in open-loop levels
(tui/bench/run/open_loop.py): counted, not good, their tokens not counted.
"""

from __future__ import annotations

import asyncio
import time

from tui.bench.run.loads import STOP_POLL_S, MakeRequest, RequestDriver
from tui.bench.run.records import LevelRun


async def run_users_for(
    driver: RequestDriver,
    c: int,
    duration_s: float,
    drain_s: float,
    make_request: MakeRequest,
    level: LevelRun,
    min_requests: int = 0,
) -> LevelRun:
    start = time.perf_counter_ns()
    end_send = start + int(duration_s * 1e9)
    last_send = [start]
    ids: set[str] = set()
    cutting: list[bool] = []  # once the drain ran out, no user sends again

    async def user() -> None:
        while not (driver.stopped or cutting) and (
            time.perf_counter_ns() < end_send or len(ids) < min_requests
        ):
            i = driver.next_index()
            req = make_request(i)
            ids.add(req.request_id)
            last_send[0] = time.perf_counter_ns()
            await driver.run(req, "warm", level.label, i, concurrency=c, into=level.records)

    tasks = [asyncio.create_task(user()) for _ in range(c)]
    pending = set(tasks)
    while pending:
        end_all = max(end_send, last_send[0]) + int(drain_s * 1e9)
        if time.perf_counter_ns() >= end_all:
            cutting.append(True)
            for rid, _tl in driver.live():
                if rid in ids:
                    driver.cancel_request(rid)
        _done, pending = await asyncio.wait(pending, timeout=STOP_POLL_S)
    await asyncio.gather(*tasks)
    if not driver.stopped:  # a user's Ctrl-C cancels; the time limit cuts
        for r in level.records:
            if r.status == "cancelled":
                r.status = "cut"
    level.complete = not driver.stopped
    return level
