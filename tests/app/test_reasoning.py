"""A reasoning model in the chat screen, with the synthetic engine streaming real
reasoning chunks (options ``reasoning_tokens``, ``think_tags``, ``tool_call``): no model
that thinks runs here (the embedded SmolLM2 does not).

While the model thinks its reasoning streams dimmed in the tail box and the status line
counts it; once the answer begins the reasoning is folded into one line above it
(unfolded by Ctrl+R or a click); the answer, the pane's Markdown and the conversation's
history hold the answer alone; TTFO shows beside TTFT in the summary, the panel and the
A/B table, and nothing of it shows where nothing was reasoning.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.app.app_support import SIZE, SYNTH, gen, submit, summary, turns
from tests.app.screen_text import screen_text
from tui.app.widgets.ab_table import ABTable
from tui.app.widgets.compact_metrics import CompactMetrics
from tui.app.widgets.conversation import TailText, Turn
from tui.app.widgets.metrics_panel import MetricsPanel
from tui.app.widgets.reasoning_fold import ReasoningFold
from tui.engines.inprocess.synthetic import THOUGHT

pytestmark = pytest.mark.private_paths  # again with the Textual fallback (docs/testing.md)

THOUGHT_HEAD = " ".join(THOUGHT.split()[:6])  # "The user asks about the two"
# gen(16) with 8 reasoning tokens in <think> tags and a tool call: the answer as shown
LOOKUP_ANSWER = 'Prefill reads the whole\n\n⚙ `lookup({"topic": "decode"})`'


def thinker(options: str, name: str = "thinker") -> str:
    return f'[engines.{name}]\nkind = "synthetic"\noptions = {{ {options} }}\n'


async def test_reasoning_streams_dimmed_then_folds_and_unfolds(
    make_config, build_app, wait_for, tmp_path
):
    # 40 reasoning tokens at 10 tok/s: four seconds of thinking to look at, then 6 of answer
    cfg = make_config(
        'default_engine = "thinker"\n'
        + gen(46)
        + thinker("tokens_per_s = 10, ttft_ms = 15, reasoning_tokens = 40")
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "Prefill or decode?")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].thinking)
        turn = turns(app)[0]
        box = turn.query_one(".tail", TailText)
        panel = app.chat.query_one(MetricsPanel)
        # while it thinks: dimmed and italic in the tail box, counted on the status line
        # and in the panel (live numbers every fifth frame)
        await wait_for(
            pilot,
            lambda: (
                "tokens" in summary(turn)
                and "thinking…" in panel.reasoning.plain
                and "The user asks" in box.plain
            ),
            10,
        )
        assert turn.thinking and turn.fold is None, "the answer began before it was seen"
        assert box.has_class("-thinking") and box.rich_style.italic
        answer_colour = turn.query_one(".answer").rich_style.color
        assert box.rich_style.color != answer_colour  # $text-muted, not the answer's colour
        assert summary(turn).startswith("thinker · thinking… ")
        assert "The user asks" in screen_text(app) and "The user asks" in box.plain
        assert panel.reasoning.display and "reasoning" in panel.reasoning.plain
        assert not turn.text  # no answer yet

        await wait_for(pilot, lambda: turn.finished, 30)
        await pilot.pause(0.1)
        fold = turn.fold
        assert isinstance(fold, ReasoningFold) and fold.collapsed
        assert not box.has_class("-thinking")
        title = str(fold.query_one("CollapsibleTitle").render())
        assert title.startswith("▸ thought for ") and title.endswith(" · 40 tokens"), title
        text = screen_text(app)
        assert "▸ thought for" in text and THOUGHT_HEAD not in text  # folded
        # the answer, the pane's Markdown and the history hold the answer alone
        assert turn.text == "Prefill reads the whole prompt at"
        assert turn.source.strip() == turn.text and "Prefill reads the whole" in text
        assert turn.reasoning.startswith(THOUGHT_HEAD)
        assert app.core.messages["A"][-1] == {"role": "assistant", "content": turn.text}
        line = summary(turn)
        assert "TTFT " in line and " · TTFO " in line and "46 tok (40 reasoning)" in line
        m = app.core.last_metrics["A"]
        assert m is not None and m.ttfo_ms is not None and m.ttft_ms is not None
        assert m.ttfo_ms > m.ttft_ms + 3000  # 40 tokens at 10 tok/s came before the answer
        plain = panel.reasoning.plain
        assert plain.startswith("TTFO ") and "thought " in plain and "reasoning 40 tok" in plain
        assert "answer 6 tok" in plain

        # Ctrl+R (shown in the footer now that a reasoning is folded) unfolds it, again folds
        assert "Thoughts" in screen_text(app)
        await pilot.press("ctrl+r")
        await pilot.pause(0.2)
        assert not fold.collapsed and fold.shown_text == turn.reasoning
        assert THOUGHT_HEAD in screen_text(app)
        await pilot.press("ctrl+r")
        await pilot.pause(0.2)
        assert fold.collapsed and THOUGHT_HEAD not in screen_text(app)
        # a click on its line unfolds it too
        await pilot.click(fold.query_one("CollapsibleTitle"))
        await pilot.pause(0.2)
        assert not fold.collapsed and THOUGHT_HEAD in screen_text(app)
    rec = json.loads((tmp_path / "session.jsonl").read_text().splitlines()[0])
    assert rec["text"] == turn.text  # the session keeps the answer as the answer...
    parts = [c[3] if len(c) > 3 else "answer" for c in rec["timeline"]["chunks"]]
    assert parts == ["reasoning"] * 40 + ["answer"] * 6  # ...and the reasoning as such


async def test_think_tags_and_a_tool_call(make_config, build_app, wait_for):
    """A model without a reasoning parser (its thinking inside <think> tags in the text)
    that ends with a tool call: the tags never show, the call is marked."""
    cfg = make_config(
        'default_engine = "thinker"\n'
        + gen(16)
        + thinker(
            "tokens_per_s = 200, ttft_ms = 15, reasoning_tokens = 8, think_tags = true, "
            'tool_call = "lookup"'
        )
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "Look it up.")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished, 30)
        await pilot.pause(0.1)
        turn = turns(app)[0]
        assert turn.fold is not None and turn.fold.collapsed
        assert turn.text == LOOKUP_ANSWER
        text = screen_text(app)
        assert '⚙ lookup({"topic": "decode"})' in text  # the code span, rendered
        assert "<think>" not in text and "</think>" not in text
        history = app.core.messages["A"][-1]["content"]
        assert history == 'Prefill reads the wholelookup({"topic": "decode"})'
        assert "The user" not in history
        assert str(turn.fold.query_one("CollapsibleTitle").render()).endswith(" · 8 tokens")


async def test_the_end_waits_for_a_frame_still_drawing(
    make_config, build_app, wait_for, monkeypatch
):
    """The frame timer draws the answers' text in its own task, the answer's end in the
    screen's. A frame whose first answer words wait for the fold's mount when the end
    comes keeps them before the end's text and summary: CI, under load, drew them after
    the tool call. Here the fold's mount waits until the end was posted (and has had
    half a second to draw), so the two always meet."""
    cfg = make_config(
        'default_engine = "thinker"\n'
        + gen(16)
        + thinker(  # 0.8 s of thinking, then 0.8 s of answer for a frame to draw
            "tokens_per_s = 10, ttft_ms = 15, reasoning_tokens = 8, think_tags = true, "
            'tool_call = "lookup"'
        )
    )
    app = build_app(cfg)
    real_mount = Turn._mount_fold
    ends_posted: list[int] = []  # at the fold's first mount: the ends posted, not drawn

    async def mount_when_the_end_came(self: Turn) -> None:
        if self.fold is None:
            chat = app.chat
            ends_posted.append(chat._ends_drawing)
            for _ in range(1000):  # until the end was posted (or drawn), 10 s at most
                if chat._ends_drawing or self.finished:
                    break
                await asyncio.sleep(0.01)
            for _ in range(50):  # and has had its chance to draw
                if self.finished:
                    break
                await asyncio.sleep(0.01)
        await real_mount(self)

    monkeypatch.setattr(Turn, "_mount_fold", mount_when_the_end_came)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "Look it up.")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished, 30)
        await pilot.pause(0.1)
        turn = turns(app)[0]
        assert ends_posted == [0]  # the fold was first mounted by a frame, before the end
        assert turn.text == LOOKUP_ANSWER
        assert turn.source == turn.text and turn.fold is not None
        assert "thought for" in str(turn.fold.query_one("CollapsibleTitle").render())


async def test_an_answer_that_only_thought(make_config, build_app, wait_for):
    """max_tokens ran out while it thought: the reasoning folds at the end all the same,
    TTFO says no answer came, and the history gets no empty answer."""
    cfg = make_config(
        'default_engine = "thinker"\n'
        + gen(6)
        + thinker("tokens_per_s = 200, ttft_ms = 15, reasoning_tokens = 50")
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "Think.")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished, 30)
        await pilot.pause(0.1)
        turn = turns(app)[0]
        assert turn.fold is not None and turn.fold.collapsed and not turn.thinking
        assert turn.text == "" and turn.reasoning.startswith("The user asks")
        assert " · TTFO – · 6 tok (6 reasoning)" in summary(turn)
        assert app.core.messages["A"] == []
        assert "thought for" in screen_text(app)


async def test_ab_table_has_a_ttfo_row_when_a_side_thought(make_config, build_app, wait_for):
    cfg = make_config(
        'default_engine = "synth"\n'
        + gen(12)
        + SYNTH
        + thinker("tokens_per_s = 200, ttft_ms = 15, reasoning_tokens = 5")
    )
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+o")
        assert app.chat.ab and app.chat.slot_engine["B"] == "thinker"
        await submit(pilot, "Count to three.")
        await wait_for(
            pilot, lambda: all(turns(app, s) and turns(app, s)[0].finished for s in "AB"), 30
        )
        await pilot.pause(0.1)
        table = app.chat.query_one(ABTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert [r[1].split(" ")[0] for r in rows] == ["TTFT", "TTFO", "decode", "prefill"]
        a, b = app.core.last_metrics["A"], app.core.last_metrics["B"]
        assert a is not None and b is not None and a.ttfo_ms == a.ttft_ms
        assert b.ttfo_ms is not None and b.ttft_ms is not None and b.ttfo_ms > b.ttft_ms
        assert str(rows[1][2]).endswith("×")
        # A did not think: no fold and no TTFO in its summary; B has both
        assert turns(app, "A")[0].fold is None and "TTFO" not in summary(turns(app, "A")[0])
        assert turns(app, "B")[0].fold is not None and "TTFO" in summary(turns(app, "B")[0])
        await pilot.press("ctrl+r")  # unfolds B's, the only one there is
        await pilot.pause(0.1)
        assert not turns(app, "B")[0].fold.collapsed


async def test_nothing_new_without_reasoning(make_config, build_app, wait_for):
    """An engine that does not think: no TTFO, no reasoning line, no fold, no key."""
    app = build_app(make_config('default_engine = "synth"\n' + gen(8) + SYNTH))
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, "Hello.")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished, 30)
        await pilot.pause(0.1)
        turn = turns(app)[0]
        assert turn.fold is None and "TTFO" not in summary(turn)
        assert "reasoning" not in summary(turn)
        assert not app.chat.query_one(MetricsPanel).reasoning.display
        assert "Thoughts" not in screen_text(app) and not app.chat.view.folds


@pytest.mark.parametrize("size", [(80, 24)])
async def test_narrow_ttft_row_carries_ttfo(make_config, build_app, wait_for, size):
    cfg = make_config(
        'default_engine = "thinker"\n'
        + gen(12)
        + thinker("tokens_per_s = 200, ttft_ms = 15, reasoning_tokens = 6")
    )
    app = build_app(cfg)
    async with app.run_test(size=size) as pilot:
        await submit(pilot, "Go.")
        await wait_for(pilot, lambda: turns(app) and turns(app)[0].finished, 30)
        await pilot.pause(0.2)
        row = app.chat.query_one(CompactMetrics).slot("A").row("ttft").values
        assert " TTFO " in row and "p50" not in row, row
        assert " TTFO " in screen_text(app)
