"""Multi-turn sessions (``--turns T``): each user's chat grows turn by turn.

A concurrency level c with sessions holds c users, each sending ``runs`` requests back to
back as before, but request k of a user is turn (k mod T) + 1 of its current
conversation: its messages are the conversation so far — every earlier user message and
the assistant's answer as it was received — then the new user message (the bench's
prompt for that request). After T turns (or a failed turn) the user starts a new
conversation. A shared system prompt, when asked, stays first. So turn t's prompt holds
the t − 1 earlier exchanges: the engine's prompt-token count grows with each turn, which
the report shows per turn number.
"""

from __future__ import annotations

import asyncio
from itertools import count

from tui.bench.run.loads import MakeRequest, RequestDriver
from tui.bench.run.records import LevelRun


async def run_sessions(
    driver: RequestDriver,
    c: int,
    runs: int,
    turns: int,
    make_request: MakeRequest,
    level: LevelRun,
) -> LevelRun:
    """Level c as c users in conversations of ``turns`` turns (records into ``level``)."""
    sessions = count(1)

    async def user() -> None:
        history: list[dict[str, str]] = []
        session = next(sessions)
        for k in range(runs):
            if driver.stopped:
                return
            if k and k % turns == 0:
                history, session = [], next(sessions)
            i = driver.next_index()
            req = make_request(i)
            system = [m for m in req.messages if m.get("role") == "system"]
            asked = [m for m in req.messages if m.get("role") != "system"]
            req.messages = system + history + asked
            req.prompt_tokens_target = None  # the conversation so far: no single target
            rec = await driver.run(req, "warm", level.label, i, concurrency=c, into=level.records)
            rec.session, rec.turn = session, len(history) // 2 + 1
            if not rec.ok:
                history, session = [], next(sessions)
                continue
            history = history + asked + [{"role": "assistant", "content": rec.timeline.text}]

    await asyncio.gather(*(user() for _ in range(c)))
    level.complete = not driver.stopped
    return level
