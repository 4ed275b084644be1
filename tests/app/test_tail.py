"""The streaming tail: plain last lines while streaming, Markdown in batches, all Markdown
at the end."""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.widgets import Static

from tui.app import tail as tail_mod
from tui.app.tail import box_height, last_lines
from tui.app.widgets import conversation
from tui.app.widgets.conversation import Conversation

PARA = "Prefill reads the whole prompt at once and decode makes one token at a time."


def test_last_lines_wraps_keeps_blank_lines_and_limits():
    text = f"{PARA}\n\n{PARA}"
    lines = last_lines(text, 30, 100)
    assert all(len(x) <= 30 for x in lines)
    assert "" in lines  # the paragraph break stays a blank line
    assert " ".join(x for x in lines if x) == f"{PARA} {PARA}"
    assert last_lines(text, 30, 3) == lines[-3:]
    assert last_lines(text, 0, 3) == [] and last_lines(text, 30, 0) == []


def test_last_lines_only_wraps_the_end_of_a_huge_text():
    huge = ("word " * 400_000) + "\n\nthe end"
    t0 = time.perf_counter()
    lines = last_lines(huge, 40, 5)
    assert time.perf_counter() - t0 < 0.05
    assert lines[-1] == "the end" and lines[-2] == "" and len(lines) == 5


def test_box_height_steps_and_caps(monkeypatch):
    assert box_height(0, 20) == 0
    assert box_height(7, 20) == 7
    assert box_height(50, 20) == 20
    monkeypatch.setattr(tail_mod, "HEIGHT_STEP", 4)
    assert box_height(5, 20) == 8 and box_height(19, 20) == 20


class Host(App):
    def compose(self) -> ComposeResult:
        yield Conversation(id="conv")


async def test_turn_streams_into_a_tail_then_commits_markdown(monkeypatch):
    monkeypatch.setattr(conversation, "COMMIT_S", 0.2)
    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        conv = app.query_one(Conversation)
        turn = await conv.add_turn("q", "synth", "r1")
        await pilot.pause()
        await turn.append(PARA + "\n\n")
        await turn.append("half a para")
        await pilot.pause()
        box = turn.query_one(".tail", Static)
        # nothing committed yet (under COMMIT_S): all of it is in the plain tail
        assert turn.answer.source == "" and box.display
        assert "half a para" in str(box.render())
        time.sleep(0.25)
        await turn.append(" and more\n\nnext")
        await pilot.pause()
        # due: the complete blocks went to Markdown, the open one stays in the tail
        assert turn.answer.source == f"{PARA}\n\nhalf a para and more\n\n"
        assert str(box.render()).strip() == "next"
        # a long tail shows only the last lines that fit the pane (fixed-height box)
        await turn.append(" ".join(["word"] * 2000))
        await pilot.pause()
        assert 0 < box.size.height <= conv.size.height
        full = box.size.height
        time.sleep(0.25)
        await turn.append("\n\n" + " ".join(["more"] * 2000))  # due: a commit
        await pilot.pause()
        # the block above the box went to Markdown; the box kept its lines and its height
        assert turn.answer.source.endswith("word word\n\n") and box.size.height == full
        await turn.finish("done")
        await pilot.pause()
        assert turn.answer.source == turn.text and not box.display
