"""``infertop replay``: a session recorded from the real engine plays back at its pace."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.app.app_support import LOCAL, SIZE, gen
from tui.app.widgets.conversation import Conversation
from tui.cli.replay import ReplayError, build_replay_app

pytestmark = pytest.mark.engine


@pytest.mark.timing
async def test_record_then_replay_at_recorded_pace(make_config, build_app, wait_for, tmp_path):
    app = build_app(make_config(gen(16) + LOCAL))
    async with app.run_test(size=SIZE) as pilot:
        for prompt in ("Say hi.", "Name a fruit."):
            await app.chat.submit_text(prompt)
            await wait_for(pilot, lambda: not app.chat.busy)
    session = tmp_path / "session.jsonl"
    recs = [json.loads(x) for x in session.read_text().splitlines()]
    assert len(recs) == 2

    replay, bad = build_replay_app(session, speed=1.0)
    assert bad == []
    async with replay.run_test(size=SIZE) as pilot:
        conv = replay.chat.query_one("#conv-A", Conversation)
        await wait_for(pilot, lambda: len(conv.turns) == 2 and conv.turns[1].finished)
        turns = conv.turns
        assert [t.prompt for t in turns] == ["Say hi.", "Name a fruit."]
        assert [t.text for t in turns] == [r["text"] for r in recs]
        assert "replay" in replay.chat.query_one("EngineBar").plain()
        replayed = replay.core.last_metrics["A"]
    # the last replayed request took as long as the recorded one: never less (each event
    # waits for its recorded time), and later only by how late the loop woke for the last
    # one (an absolute schedule: lateness does not add up over the chunks). 250 ms is
    # room for a loaded machine's late wake-up; a wrong pace (a speed of 2, gaps that add
    # up) is off by a share of the whole answer.
    assert replayed is not None
    rec_e2e = recs[1]["metrics"]["e2e_ms"]
    assert rec_e2e - 1.0 <= replayed.e2e_ms < rec_e2e + max(250.0, 0.25 * rec_e2e)
    assert replayed.output_tokens == recs[1]["metrics"]["output_tokens"]
    assert not (tmp_path / "replay-session.jsonl").exists()


def test_replay_bad_inputs(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not json\n")
    with pytest.raises(ReplayError, match="no requests recorded"):
        build_replay_app(empty)
    with pytest.raises(ReplayError, match="cannot read"):
        build_replay_app(tmp_path / "missing.jsonl")
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "replay", str(tmp_path / "missing.jsonl")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("infertop replay: cannot read")
    assert "Traceback" not in proc.stderr
