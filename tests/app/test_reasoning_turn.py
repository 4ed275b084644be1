"""A turn's reasoning in one pane (the widget alone) and the text helpers beside it: the
fold keeps the turn a pane high, the screen is laid out only when the fold comes, the
model's text is terminal-safe on every path, and untrusted chunk lists are read safely."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from textual.app import App, ComposeResult

from tests.app.screen_quiet import layouts_from_quiet, quiet
from tests.support.cost import size_ratio
from tui.app.format import summary_line
from tui.app.screens.request_timeline import RUNS_SHOWN, parts_text
from tui.app.widgets.conversation import Conversation, TailText, Turn
from tui.app.widgets.metrics_panel import reasoning_text
from tui.app.widgets.reasoning_fold import thought_title
from tui.core.events import ANSWER, REASONING, TOOL
from tui.core.metrics import RequestMetrics

pytestmark = pytest.mark.private_paths  # again with the Textual fallback (docs/testing.md)

LINE = "I should weigh prefill against decode before I answer this one."


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Conversation(id="conv")


@asynccontextmanager
async def one_turn(size: tuple[int, int]) -> AsyncIterator[tuple[Any, Conversation, Turn]]:
    async with Host().run_test(size=size) as pilot:
        conv = pilot.app.query_one(Conversation)
        yield pilot, conv, await conv.add_turn("q", "synth", "r1")


async def test_thinking_then_the_fold_keeps_the_turn_a_pane_high(monkeypatch):
    """Reasoning streams into the pane-high box without laying the screen out; the fold's
    line takes one line of the box when the answer begins (so the pane gets no
    scrollbar), and the answer streams on without layouts."""
    async with one_turn(size=(60, 20)) as (pilot, conv, turn):
        await pilot.pause()
        box = turn.query_one(".tail", TailText)
        height = box.size.height
        assert height == conv.size.height - 3
        await turn.append("The", REASONING)  # the first token: a class, the status line
        layouts = await layouts_from_quiet(monkeypatch, pilot)
        for i in range(40):  # past a pane of reasoning
            await turn.append(f" {LINE} {i}\n", REASONING)
            await pilot.pause()
        assert layouts == [] and box.size.height == height and turn.thinking
        assert box.plain.endswith("this one. 39") and box.has_class("-thinking")
        await turn.append("Prefill", ANSWER)
        await pilot.pause()
        assert turn.fold is not None and turn.fold.collapsed and not turn.thinking
        assert box.size.height == height - 1 and box.plain == "Prefill"
        assert conv.max_scroll_y == 0  # the fold's line did not push the pane over
        await quiet(pilot, layouts)
        for i in range(40):
            await turn.append(f" reads the prompt {i}\n\n")
            await pilot.pause()
        assert layouts == [] and conv.max_scroll_y == 0
        await turn.finish("done")
        await pilot.pause()
        assert turn.source == turn.text and LINE not in turn.text
        assert turn.fold.text == turn.reasoning and turn.reasoning.count(LINE) == 40


async def test_the_models_text_is_terminal_safe_in_the_box_the_fold_and_a_tool_call():
    evil = "\x1b[2J\x1b]0;owned\x07\x9b31m"
    async with one_turn(size=(60, 20)) as (pilot, conv, turn):
        await turn.append(f"think {evil}", REASONING)
        await pilot.pause()
        box = turn.query_one(".tail", TailText)
        assert "think" in box.plain and "\x1b" not in box.plain and "\x07" not in box.plain
        await turn.append(f"f({evil})", TOOL)
        await turn.finish("done")
        turn.fold.collapsed = False
        await pilot.pause(0.1)
        for text in (turn.fold.shown_text, turn.text, turn.source, turn.reasoning):
            assert not any(c in text for c in "\x1b\x07\x9b"), repr(text)
        assert turn.text.startswith("⚙ `f(") and turn.text.endswith(")`")


async def test_reasoning_after_the_answer_began_goes_to_the_fold_unseen_until_opened(
    monkeypatch,
):
    """Interleaved thinking: reasoning that comes after the answer began is kept in the
    fold, and drawn (a layout) only when the fold is opened."""
    async with one_turn(size=(60, 20)) as (pilot, conv, turn):
        await turn.append("first thought", REASONING)
        await turn.append("An answer")
        fold = turn.fold
        assert fold is not None and fold.shown_text == ""
        # the fold's own mount and layout, and the box a line shorter: done before counting
        layouts = await layouts_from_quiet(monkeypatch, pilot)
        await turn.append(" and a second thought", REASONING)
        await turn.append(" goes on.")
        await pilot.pause()
        assert layouts == [] and turn.text == "An answer goes on."
        assert fold.text == "first thought and a second thought" and fold.shown_text == ""
        fold.collapsed = False
        await pilot.pause(0.1)
        assert fold.shown_text == fold.text


def test_thought_title():
    assert thought_title(None, None, False) == "thought"
    assert thought_title(3210.0, 120, False) == "thought for 3.2 s · 120 tokens"
    assert thought_title(450.0, 1, True) == "thought for 450 ms · 1 token (est.)"


R = RequestMetrics(
    ttft_ms=180.0,
    ttfr_ms=175.0,
    e2e_ms=5200.0,
    output_tokens=186,
    output_tokens_source="usage",
    ttfo_ms=3400.0,
    thinking_ms=3220.0,
    reasoning_tokens=120,
    reasoning_tokens_source="chunk-count-estimate",
    answer_tokens=66,
    answer_tokens_estimated=True,
    reasoning_tps=37.0,
    answer_tps=90.1,
)


def test_summary_line_says_ttfo_only_where_the_model_thought():
    line = summary_line(R)
    assert line.startswith("TTFT 180 ms · TTFO 3400 ms · 186 tok (~120 reasoning) · ")
    plain = RequestMetrics(ttft_ms=180.0, ttfr_ms=175.0, e2e_ms=900.0, ttfo_ms=180.0)
    assert "TTFO" not in summary_line(plain) and "reasoning" not in summary_line(plain)
    hidden = RequestMetrics(ttft_ms=180.0, ttfr_ms=175.0, e2e_ms=900.0, ttfo_ms=180.0)
    hidden.reasoning_tokens, hidden.output_tokens = 40, 60  # the engine counted, hid it
    assert "TTFO" not in summary_line(hidden) and "60 tok (40 reasoning)" in summary_line(hidden)


def test_reasoning_line_marks_estimates():
    assert reasoning_text(R) == (
        "TTFO 3400 ms (TTFT 180 ms) · thought 3.2 s\n"
        "reasoning 120 tok (est.) 37.0 t/s · answer 66 tok (est.) 90.1 t/s"
    )


def test_parts_text_names_the_runs_of_parts():
    chunks = [[i, 1, "reasoning"] for i in range(3)] + [[3, 1], [4, 1, "tool"], [5, 1]]
    assert parts_text(chunks) == "chunks: 1–3 reasoning · 4 answer · 5 tool call · 6 answer"
    assert parts_text([[0, 1], [1, 1]]) == ""  # all answer: nothing to mark
    assert parts_text([]) == ""


def test_parts_text_reads_hostile_lists_safely_and_in_linear_time():
    """The proxy's JSON is untrusted: anything that is not a known part is named
    "other" or taken as answer text, nothing raises, past RUNS_SHOWN runs are counted,
    and its cost grows with the list's length, not its square (200,000 alternating
    chunks against 20,000: tests/support/cost.py)."""
    assert parts_text(None) == "" and parts_text("reasoning") == "" and parts_text({}) == ""
    odd = [None, 7, "x", [], [1], [1, 2, {"a": 1}], [1, 2, "\x1b[2J"], [1, 2, ["tool"]]]
    assert parts_text(odd) == "chunks: 1–5 answer · 6–8 other"
    many = [[i, 1, "reasoning"] if i % 2 else [i, 1] for i in range(200_000)]
    assert size_ratio(lambda n: parts_text(many[:n]), 20_000) < 40  # linear ~10
    text = parts_text(many)
    assert text.count(" · ") == RUNS_SHOWN and text.endswith(f" · {200_000 - RUNS_SHOWN} more runs")
