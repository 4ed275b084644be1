"""An open reasoning fold costs the same per frame whatever its length (issue 48).

A model that thinks between parts of its answer keeps streaming reasoning into the fold
above the answer; a user may have unfolded it. The fold's body was a ``Static`` given the
whole reasoning on each frame: Textual wrapped and rendered all of it again, so a frame
cost grew with what the model had thought. Counted here, not timed: the characters of
the fold's text that go through wrapping and rendering in a frame, once the fold holds
2 KB of reasoning and once it holds 390 KB, the same text appended per frame. Also: a
stream of blank text costs wrapping linear in its length (a run of spaces at a line's
end was wrapped again with every chunk), in the fold and in the answer's tail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.content import Content
from textual.visual import Visual

from tui.app import tail
from tui.app.widgets.conversation import Conversation
from tui.app.widgets.reasoning_fold import ReasoningFold
from tui.core.events import REASONING

pytestmark = pytest.mark.private_paths  # again with the Textual fallback (docs/testing.md)

LINE = "I should weigh prefill against decode before I answer this one. "
FRAMES = 12


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Conversation(id="conv")


def count_fold_work(monkeypatch: pytest.MonkeyPatch, fold: ReasoningFold) -> list[int]:
    """A list that gets, from now on, the number of characters of ``fold``'s text each
    wrap or render handles: a paragraph wrapped (tui/app/tail.py), a visual rendered to
    lines by Textual for a widget in the fold, a line the fold's body draws."""
    work: list[int] = []
    wrap = tail.wrap_paragraph

    def wrap_counted(para: str, *a: Any, **k: Any) -> list[tuple[int, str]]:
        work.append(len(para))
        return wrap(para, *a, **k)

    monkeypatch.setattr(tail, "wrap_paragraph", wrap_counted)
    to_strips = Visual.to_strips.__func__  # type: ignore[attr-defined]

    def strips_counted(cls: type[Visual], widget: Any, visual: Visual, *a: Any, **k: Any) -> Any:
        if widget is fold or fold in widget.ancestors:
            work.append(len(visual.plain) if isinstance(visual, Content) else 0)
        return to_strips(cls, widget, visual, *a, **k)

    monkeypatch.setattr(Visual, "to_strips", classmethod(strips_counted))
    for widget in fold.query("*"):
        draw: Callable[[int], Any] | None = getattr(type(widget), "render_line", None)
        if draw is None or type(widget).__module__.split(".")[0] != "tui":
            continue

        def line_counted(self: Any, y: int, _draw: Callable[..., Any] = draw) -> Any:
            strip = _draw(self, y)
            work.append(strip.cell_length)
            return strip

        monkeypatch.setattr(type(widget), "render_line", line_counted)
    return work


async def test_an_open_fold_costs_the_same_per_frame_at_any_length(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    async with Host().run_test(size=(80, 24)) as pilot:
        conv = pilot.app.query_one(Conversation)
        turn = await conv.add_turn("q", "synth", "r1")
        await turn.append(LINE * 30, REASONING)  # ~2 KB
        await turn.append("An answer.")
        fold = turn.fold
        assert fold is not None
        fold.collapsed = False
        await pilot.pause(0.2)
        work = count_fold_work(monkeypatch, fold)

        async def per_frame() -> float:
            await pilot.pause(0.1)
            work.clear()
            for i in range(FRAMES):
                await turn.append(f"{LINE}{i} ", REASONING)
                await pilot.pause()
            await pilot.pause(0.1)
            return sum(work) / FRAMES

        short = await per_frame()
        await turn.append(LINE * 6000, REASONING)  # ~380 KB more, in one go
        await pilot.pause(0.3)
        long = await per_frame()
        assert fold.shown_text == turn.reasoning and len(turn.reasoning) > 380_000
        # per frame: the new text, the line it opened, the lines repainted, at any length
        assert short > 0 and long <= 2 * short + 2000, (short, long)
        print(f"characters handled per frame: {short:.0f} at 2 KB, {long:.0f} at 390 KB")


@pytest.mark.parametrize("make", [lambda: tail.TailLines(60, 20), lambda: tail.WrappedLines(60)])
def test_blank_text_is_wrapped_once(monkeypatch, make) -> None:  # type: ignore[no-untyped-def]
    work: list[int] = []
    wrap = tail.wrap_paragraph
    monkeypatch.setattr(tail, "wrap_paragraph", lambda p, *a: work.append(len(p)) or wrap(p, *a))
    lines = make()
    lines.add("a word then")
    for _ in range(2000):
        lines.add(" " * 500)  # 1 MB of spaces, in chunks
    lines.add(" and a word")
    assert sum(work) < 1_000_000 + 2002 * (2 * 60 + 40)  # each space once, and the open line
    if isinstance(lines, tail.TailLines):
        shown = lines.lines()[-2:]
    else:
        shown = [lines.line(len(lines) - 2), lines.line(len(lines) - 1)]
    assert shown == ["a word then", "and a word"]  # as the whole text wraps
