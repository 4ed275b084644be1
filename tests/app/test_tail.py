"""The streaming tail: plain last lines while streaming, Markdown in batches, all Markdown
at the end."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.geometry import Size
from textual.widgets import Markdown

from tests.app.screen_quiet import layouts_from_quiet
from tests.support.virtual_time import VirtualClock
from tui.app import tail as tail_mod
from tui.app.tail import TailLines, last_lines, scroll_step, wrap_paragraph
from tui.app.widgets import conversation
from tui.app.widgets.answer_segment import AnswerSegment, can_split_before
from tui.app.widgets.conversation import Conversation, TailText, Turn

pytestmark = pytest.mark.private_paths  # again with the Textual fallback (docs/testing.md)

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
    """Cost in the lines shown, not in the text's length: 2 MB of text (wrapping all of
    it takes seconds) costs well under 50 ms of this thread's CPU time. Thread CPU time,
    not wall time: a busy machine delays the thread but does not add to its CPU time."""
    huge = ("word " * 400_000) + "\n\nthe end"
    t0 = time.thread_time()
    lines = last_lines(huge, 40, 5)
    assert time.thread_time() - t0 < 0.05
    assert lines[-1] == "the end" and lines[-2] == "" and len(lines) == 5


def test_last_lines_fit_wide_characters_and_drop_control_codes():
    from rich.cells import cell_len

    lines = last_lines("漢字" * 30 + "\n\x1b[1mok\x07\tz", 10, 100)
    assert all(cell_len(x) <= 10 for x in lines)
    assert "".join(lines[:-1]) == "漢字" * 30  # wrapped by cells, nothing lost
    assert lines[-1] == "[1mok   z"  # ESC, BEL dropped; the tab is spaces to its stop


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("ab c\n\t漢é-"), max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=12),
    width=st.integers(1, 25),
)
def test_tail_lines_fed_in_pieces_wrap_as_the_whole_text(text, cuts, width):
    """Wrapping as text arrives gives the lines of wrapping it all at once, and no line
    but the open one ever changes: what is on screen never re-flows."""
    whole = TailLines(width, 1000)
    whole.add(text)
    pieces = TailLines(width, 1000)
    shown: list[str] = []
    for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)], strict=True):
        pieces.add(text[a:b])
        now = pieces.lines()
        stable = shown[:-1]  # every line but the open one
        assert now[: len(stable)] == stable
        shown = now
    assert pieces.lines() == whole.lines()
    assert all(cell_len(line) <= max(width, 2) for line in whole.lines())
    # every word is there, in order (a word wider than the line is cut in pieces)
    words = "".join(text.replace("\t", " ").split())
    assert "".join("".join(x.split()) for x in whole.lines()) == words


def test_a_full_box_scrolls_in_steps_and_keeps_its_lines_between_jumps():
    tail = TailLines(width=10, limit=8)
    views = []
    for i in range(30):
        tail.add(f"line {i:02}\n")
        views.append(tail.view(step=4))  # a step of half the box
    assert views[7] == [f"line {i:02}" for i in range(8)]  # the box just filled
    # the ninth line jumps the box down by the step (4 lines): four blank lines below
    assert views[8] == [f"line {i:02}" for i in range(4, 9)]
    assert views[11] == [f"line {i:02}" for i in range(4, 12)]  # filled again, no jump
    assert views[12][0] == "line 08"  # the next jump
    for a, b in zip(views[8:11], views[9:12], strict=True):
        assert b[: len(a)] == a  # between jumps every line stays where it was
    assert tail.top == 24 and views[-1] == [f"line {i:02}" for i in range(24, 30)]


def test_wrap_paragraph_is_greedy_keeps_the_indent_and_cuts_long_words():
    assert wrap_paragraph("  an indented line that wraps", 12) == [
        (0, "  an"),
        (5, "indented"),
        (14, "line that"),
        (24, "wraps"),
    ]
    assert wrap_paragraph("  continued", 12, first=False) == [(2, "continued")]
    assert wrap_paragraph("abcdefghij xy", 4) == [(0, "abcd"), (4, "efgh"), (8, "ij"), (11, "xy")]
    assert wrap_paragraph("", 5) == [(0, "")]


def test_a_full_box_scrolls_by_a_step_of_its_height(monkeypatch):
    assert [scroll_step(n) for n in (1, 2, 19, 20)] == [1, 1, 10, 10]  # halves, >= 1 line
    monkeypatch.setattr(tail_mod, "SCROLL_STEPS", 4)
    assert scroll_step(20) == 5 and scroll_step(3) == 1


class Host(App):
    def compose(self) -> ComposeResult:
        yield Conversation(id="conv")


@asynccontextmanager
async def one_turn(size: tuple[int, int]) -> AsyncIterator[tuple[Any, Conversation, Turn]]:
    """A conversation pane of ``size`` with one turn added: (pilot, pane, turn)."""
    app = Host()
    async with app.run_test(size=size) as pilot:
        conv = app.query_one(Conversation)
        yield pilot, conv, await conv.add_turn("q", "synth", "r1")


async def test_turn_streams_into_a_tail_then_commits_markdown(monkeypatch):
    # the turn's commit clock is virtual: "due" is when the test moves it on, not when a
    # busy machine gets round to the next line (tests/support/virtual_time.py)
    clock = VirtualClock()
    monkeypatch.setattr(conversation, "time", clock.time)
    monkeypatch.setattr(conversation, "COMMIT_S", 0.2)
    monkeypatch.setattr(conversation, "COMMIT_FOLLOWING_S", 0.2)
    async with one_turn(size=(60, 20)) as (pilot, conv, turn):
        await pilot.pause()
        box = turn.query_one(".tail", TailText)
        full = box.size.height  # a pane high from the start: no layout mid-stream
        assert box.display and full == conv.size.height - 3  # the prompt line stays in view
        await turn.append(PARA + "\n\n")
        await turn.append("half a para")
        await pilot.pause()
        # nothing committed yet (under COMMIT_S): all of it is in the plain tail
        assert turn.source == "" and box.display
        assert "half a para" in box.plain
        drawn = [box.render_line(y).text for y in range(box.size.height)]
        assert any("half a para" in line for line in drawn)
        assert all(len(line) == box.size.width for line in drawn)  # padded to the box
        clock.sleep(0.25)
        await turn.append(" and more\n\nnext")
        await pilot.pause()
        # due, but all of it is in the box: nothing above it to commit
        assert turn.source == "" and box.plain.endswith("half a para and more\n\nnext")
        # a long tail shows only the last lines that fit the pane (fixed-height box)
        await turn.append(" ".join(["word"] * 2000))
        await pilot.pause()
        assert box.size.height == full and box.plain.split("\n")[-1].startswith("word")
        clock.sleep(0.25)
        await turn.append("\n\n" + " ".join(["more"] * 2000))  # due: a commit
        await pilot.pause()
        # the blocks above the box went to Markdown; the box kept its lines and its height
        words = " ".join(["word"] * 2000)
        assert turn.source == f"{PARA}\n\nhalf a para and more\n\nnext{words}\n\n"
        assert box.size.height == full
        await turn.finish("done")
        await pilot.pause()
        assert turn.source == turn.text and not box.display


def uncached_height(seg: AnswerSegment) -> int:
    """The segment's height as Textual's own Markdown computes it (no cache of ours)."""
    width = seg.size.width
    return Markdown.get_content_height(seg, Size(width, 0), seg.app.size, width)


def test_segments_split_only_where_markdown_cannot_join():
    assert can_split_before("para one\n\n", "Para two")
    assert can_split_before("# Title\n\n", "text")
    assert not can_split_before("para one\n", "para two")  # no blank line yet
    assert not can_split_before("```py\nx = 1\n\n", "y = 2")  # inside a code fence
    assert can_split_before("```py\nx = 1\n```\n\n", "after")  # the fence closed
    assert not can_split_before("~~~\na\n\n", "b")
    continuing = ("- item", "* item", "+ item", "2. item", "3) item", "    code", "| a |", "> q")
    for head in continuing:
        assert not can_split_before("- item\n\n", head), head
    assert not can_split_before("text\n\n", "")


async def test_a_long_answer_streams_into_segments_that_render_as_one(monkeypatch):
    """Blocks go into several Markdown segments of about SEGMENT_BLOCKS blocks, never split
    inside a code fence or a list; together they hold exactly the answer's text."""
    monkeypatch.setattr(conversation, "COMMIT_S", 0.0)
    monkeypatch.setattr(conversation, "COMMIT_FOLLOWING_S", 0.0)
    monkeypatch.setattr(conversation, "SEGMENT_BLOCKS", 4)
    async with one_turn(size=(60, 12)) as (
        pilot,
        conv,
        turn,
    ):  # a box of 9 lines: blocks pass above
        for i in range(12):
            await turn.append(f"{PARA} {i}\n\n")
            await pilot.pause()  # a layout after each block: a stale height would show
        await turn.append("```\ncode 1\n\ncode 2\n\ncode 3\n\ncode 4\n\ncode 5\n```\n\n")
        await turn.append("- a\n\n- b\n\n- c\n\n- d\n\n- e\n\n")
        for i in range(8):  # the code and the list go above the box, a block at a time
            await turn.append(f"{PARA} after {i}\n\n")
            await pilot.pause()
        assert "- e" in turn.source  # committed while streaming
        await turn.append("the end\n\n")
        await turn.finish("done")
        await pilot.pause()
        segments = list(turn.query(AnswerSegment))
        assert len(segments) >= 3
        assert turn.source == turn.text
        for seg in segments:
            fences = sum(1 for line in seg.source.splitlines() if line.startswith("```"))
            assert fences % 2 == 0, seg.source  # no fence was cut in two
            assert not seg.source.startswith(("- ", "code")), seg.source
        # one list: its five items are in the same segment
        assert sum("- a" in seg.source and "- e" in seg.source for seg in segments) == 1
        # the segments stack without overlap and each is as tall as its blocks
        tops = [seg.region.y for seg in segments]
        assert tops == sorted(tops)
        for seg in segments:
            assert seg.size.height == uncached_height(seg)


async def test_segment_height_follows_width_after_it_is_cached():
    """AnswerSegment caches its content height; a narrower pane must still re-wrap it."""
    async with one_turn(size=(100, 40)) as (pilot, conv, turn):
        await turn.append(f"{PARA} {PARA}\n\n{PARA}\n\n")
        await turn.finish("done")
        await pilot.pause()
        seg = turn.query_one(AnswerSegment)
        wide = seg.size.height
        await pilot.resize_terminal(40, 40)
        await pilot.pause()
        assert seg.size.height > wide
        assert seg.size.height == uncached_height(seg)


async def test_nothing_is_committed_while_the_pane_follows_the_stream(monkeypatch):
    """While the pane follows the stream the tail shows what is on screen: no block goes
    to Markdown (each commit lays out the screen) until the user scrolls up (to an
    earlier answer: scrolled as a user does, so Textual's own reading of the scroll
    position says so too when the fast paths are off)."""
    monkeypatch.setattr(conversation, "COMMIT_S", 3600.0)
    async with one_turn(size=(60, 20)) as (pilot, conv, earlier):
        await earlier.append(f"{PARA}\n\n{PARA}\n\n")
        await earlier.finish("done")
        turn = await conv.add_turn("q2", "synth", "r2")
        for i in range(40):  # not due yet: all of it in the tail, which fills the pane
            await turn.append(f"{PARA} {i}\n\n")
        await pilot.pause()
        box = turn.query_one(".tail", TailText)
        assert box.size.height == conv.size.height - 3 and turn.source == ""
        monkeypatch.setattr(conversation, "COMMIT_S", 0.0)
        await turn.append(f"{PARA} more\n\n")
        await pilot.pause()
        assert turn.source == ""  # following: the blocks above the box are unseen
        conv.scroll_home(animate=False)  # the user scrolled up: what is above must be there
        await pilot.pause()
        assert not conv.following
        await turn.append(f"{PARA} again\n\n")
        await pilot.pause()
        assert f"{PARA} 0\n\n" in turn.source and box.size.height == conv.size.height - 3
        await turn.finish("done")
        assert turn.source == turn.text


async def test_the_text_keeps_its_width_when_the_scrollbar_appears():
    """The conversation keeps a gutter for its scrollbar: when an answer first overflows
    the pane, the scrollbar takes the gutter, and no line of the conversation re-wraps
    (a narrower pane re-wrapped every Markdown block and laid the screen out twice more:
    benchmarks/watch_cost.py)."""
    async with one_turn(size=(60, 20)) as (pilot, conv, turn):
        await turn.append(f"{PARA}\n\n")
        await pilot.pause()
        assert not conv.show_vertical_scrollbar
        width, turn_width = conv.scrollable_content_region.width, turn.size.width
        for i in range(30):
            await turn.append(f"{PARA} {i}\n\n")
        await pilot.pause()
        assert not conv.show_vertical_scrollbar  # streaming: the box is a pane high
        await turn.finish("done")
        await pilot.pause()
        assert conv.show_vertical_scrollbar  # the answer, all Markdown, overflowed
        assert conv.scrollable_content_region.width == width
        assert turn.size.width == turn_width == pilot.app.size.width - 2  # padding 1 + gutter 1


async def test_an_answer_streams_without_laying_out_the_screen(monkeypatch):
    """The tail box is a pane high from the prompt until the answer ends, and the status
    line keeps its one line: from the first token on, past a pane of text, the screen is
    never laid out again until the answer ends (each layout, twice over, took ~25 ms of
    the UI's time at 120x40 while the engine decoded: benchmarks/watch_cost.py)."""
    async with one_turn(size=(60, 20)) as (pilot, conv, turn):
        await pilot.pause()
        box = turn.query_one(".tail", TailText)
        height = box.size.height
        assert box.display and height == conv.size.height - 3  # before the first token
        layouts = await layouts_from_quiet(monkeypatch, pilot)
        turn.waiting("waiting for A")
        for i in range(40):  # the first token, then past a pane of text
            await turn.append(f"{PARA} {i}\n\n")
            await pilot.pause()
        assert layouts == [] and box.size.height == height
        assert box.plain.endswith("one token at a time. 39")
        await turn.finish("done")
        await pilot.pause()
        assert layouts and not box.display and turn.source == turn.text


async def test_the_box_follows_the_pane_height_before_and_while_streaming():
    """When the pane changes height (the terminal is resized) the box re-fits in that
    layout, not at the next token; a turn still being mounted is left alone."""
    async with one_turn(size=(60, 20)) as (pilot, conv, turn):
        await pilot.pause()
        box = turn.query_one(".tail", TailText)
        await pilot.resize_terminal(60, 26)
        await pilot.pause()
        assert box.size.height == conv.size.height - 3 == 23
        await turn.append("first token")
        await pilot.pause()
        assert box.size.height == 23 and box.plain == "first token"
        await turn.finish("done")
        conv.mount(conversation.Turn("q2", "synth", "r2"))  # not awaited: not composed yet
        conv.on_resize()
        await pilot.pause()
        assert conv.turns[-1].query_one(".tail", TailText).size.height == 23
