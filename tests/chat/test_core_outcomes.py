"""The chat core publishes one RequestOutcome per answer that was sent (source "chat" or
"run", the client infertop itself); an engine that never loaded sends nothing."""

from __future__ import annotations

import time

from tests.support.made_outcomes import KeptOutcomes
from tui.core.outcome import INFERTOP_ITSELF, Outcomes


async def test_each_answer_sent_is_one_outcome(chat, two):
    keep, outcomes = KeptOutcomes(), Outcomes()
    outcomes.add(keep)
    core, _events = chat(outcomes=outcomes, source="run")
    t_before = time.time()
    m = (await core.run_turn(core.start_turn("hello")))["A"]
    core.toggle_ab()
    await core.run_turn(core.start_turn("again"))  # A and B: two answers
    assert len(keep.seen) == 3
    first = keep.seen[0]
    assert first.source == "run" and first.state == "done" and first.client == INFERTOP_ITSELF
    assert first.metrics is m and first.metrics.output_tokens == 8
    assert (first.route, first.api, first.upstream) == ("synthetic", "synthetic", "in-process")
    assert t_before - 1 < first.t0_wall < time.time()
    assert abs(first.e2e_s * 1000 - m.e2e_ms) < 1e-6
    assert len({o.id for o in keep.seen}) == 3


async def test_an_engine_that_never_loaded_publishes_nothing(chat, two):
    keep, outcomes = KeptOutcomes(), Outcomes()
    outcomes.add(keep)
    text = two.replace("ttft_ms = 5 }", 'ttft_ms = 5, fail_load = "no such model" }', 1)
    core, _events = chat(text, outcomes=outcomes)
    await core.run_turn(core.start_turn("hello"))
    assert keep.seen == []
