"""TextLines: what it draws (wrapped, styled, control characters dropped) and what it asks
Textual to repaint (only changed rows; a layout only when the row count changes)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Region

from tui.app.widgets.text_lines import TextLines

pytestmark = pytest.mark.private_paths  # both drawing paths


class Host(App[None]):
    CSS = "TextLines { width: 20; }"

    def compose(self) -> ComposeResult:
        yield TextLines("first line", id="lines")


def rows(widget: TextLines) -> list[str]:
    return [widget.render_line(y).text for y in range(widget.size.height)]


async def test_lines_wrap_by_words_to_the_width_and_keep_their_style() -> None:
    async with Host().run_test() as pilot:
        w = pilot.app.query_one(TextLines)
        w.show_lines(["a short one", ("the second line is longer than twenty cells", "bold red")])
        await pilot.pause()
        assert [r.rstrip() for r in rows(w)] == [
            "a short one",
            "the second line is",
            "longer than twenty",
            "cells",
        ]
        assert all(len(r) == 20 for r in rows(w))  # each row fills the width
        seg = w.render_line(1)._segments[0]
        assert seg.style is not None and seg.style.bold and seg.style.color is not None
        assert seg.style.color.name == "red"
        plain = w.render_line(0)._segments[0].style
        assert plain == w.rich_style and not (plain or Style()).bold
        assert w.plain == "a short one\nthe second line is longer than twenty cells"
        assert str(w.render()) == w.plain


async def test_control_characters_never_reach_the_terminal() -> None:
    async with Host().run_test() as pilot:
        w = pilot.app.query_one(TextLines)
        w.update("\x1b]52;c;aGk=\x07\x1b[31mred\x9b2J\tend")
        await pilot.pause()
        drawn = "".join(rows(w))
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in drawn)
        assert "red" in drawn and "2J" in drawn and "end" in drawn


async def test_only_changed_rows_are_repainted_and_layout_only_on_a_new_row_count() -> None:
    async with Host().run_test() as pilot:
        w = pilot.app.query_one(TextLines)
        w.update("one\ntwo\nthree")
        await pilot.pause()
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        real = w.refresh

        def spy(*regions: Any, **kw: Any) -> Any:
            calls.append((regions, kw))
            return real(*regions, **kw)

        w.refresh = spy  # type: ignore[method-assign]
        w.update("one\ntwo\nthree")
        assert calls == []  # the same text: nothing to repaint
        w.update("one\nTWO\nthree")
        assert calls == [((Region(0, 1, 20, 1),), {})]
        await pilot.pause()
        assert rows(w)[1].rstrip() == "TWO"
        calls.clear()
        w.update("one\nTWO\nthree\nfour")
        assert calls == [((), {"layout": True})]
        await pilot.pause()
        assert w.size.height == 4 and rows(w)[3].rstrip() == "four"


async def test_unwrapped_lines_are_cropped_not_wrapped() -> None:
    class Cropped(App[None]):
        CSS = "TextLines { width: 10; height: 1; }"

        def compose(self) -> ComposeResult:
            yield TextLines("0123456789abcdef", wrap=False)

    async with Cropped().run_test() as pilot:
        w = pilot.app.query_one(TextLines)
        assert rows(w) == ["0123456789"]


class Both(App[None]):
    """A TextLines, an answer's tail and metric rows in a coloured container, and a
    TextLines with padding (which must take Textual's own path)."""

    CSS = """
    Vertical { background: $panel; }
    #lines { width: 24; background: $boost; }
    #padded { width: 24; padding: 0 1; }
    TailText { width: 30; height: 3; }
    """

    def compose(self) -> ComposeResult:
        from textual.containers import Vertical

        from tui.app.widgets.conversation import TailText
        from tui.app.widgets.metric_lines import MetricLines

        with Vertical():
            yield TextLines(id="lines")
            yield TextLines(id="padded")
            yield TailText()
            yield MetricLines([("itl", "ITL"), ("tps", "tok/s")], label_width=6, values_width=8)


def _cells(strips: list[Any]) -> list[list[tuple[str, Any]]]:
    return [[(seg.text, seg.style) for seg in strip.simplify()] for strip in strips]


@pytest.mark.fast_paths
async def test_the_direct_path_draws_what_textuals_styles_cache_draws(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every line filter Textual may apply (ANSI to truecolor; NO_COLOR's monochrome),
    and none (``ansi_color``), on a dark and a light theme."""
    from tui.app.widgets.conversation import TailText
    from tui.app.widgets.metric_lines import MetricLines

    for theme, ansi, no_color in (
        ("textual-dark", False, False),
        ("textual-light", False, False),
        ("textual-dark", True, False),
        ("textual-light", False, True),
    ):
        if no_color:
            monkeypatch.setenv("NO_COLOR", "1")
        app = Both(ansi_color=ansi)
        assert len(app.get_line_filters()) == (0 if ansi else 1 + no_color)
        async with app.run_test() as pilot:
            app.theme = theme
            lines = [
                "a line",
                ("a warning that wraps over two rows", "bold yellow"),
                ("dim", "dim"),
            ]
            for w in app.query(TextLines):
                w.show_lines(lines)
            tail = app.query_one(TailText)
            tail.show(["the tail's first line", "", "and its last"])
            metrics = app.query_one(MetricLines)
            metrics.show("itl", [3.0, 9.5, 4.2, 12.0, 7.7], "12.0 ms")
            await pilot.pause()
            for w in [*app.query(TextLines), tail, metrics]:
                width, height = w.region.size
                assert height >= 2
                for crop in (
                    Region(0, 0, width, height),
                    Region(0, 1, width, 1),
                    Region(3, 0, 7, 2),
                ):
                    ours = w.render_lines(crop)
                    w._styles_cache.clear()
                    textuals = w._styles_cache.render_widget(w, crop)
                    assert _cells(ours) == _cells(textuals), (theme, w, crop)
            assert app.query_one("#lines", TextLines)._plain_box()
            assert not app.query_one("#padded", TextLines)._plain_box()


@pytest.mark.fast_paths
async def test_the_direct_path_follows_style_changes_made_later() -> None:
    """Whether a widget is a plain box is kept until its styles change (Textual's count
    of them): an inline style, a class, and an ancestor's opacity, each seen at once."""
    async with Both().run_test() as pilot:
        w = pilot.app.query_one("#lines", TextLines)
        w.show_lines(["a line"])
        await pilot.pause()
        assert w._plain_box()
        w.styles.padding = (0, 1)
        assert not w._plain_box()
        w.styles.padding = 0
        assert w._plain_box()
        w.styles.tint = "red 50%"
        assert not w._plain_box()
        w.styles.clear_rule("tint")
        assert w._plain_box()
        w.parent.styles.opacity = 0.5  # type: ignore[union-attr]
        assert not w._plain_box()


class HiddenHost(App[None]):
    CSS = "#side { display: none; } TextLines { width: 20; }"

    def compose(self) -> ComposeResult:
        from textual.containers import Vertical

        with Vertical(id="side"):
            yield TextLines("first line", id="lines")


async def test_a_hidden_widget_asks_for_no_layout_and_shows_its_last_text_once_shown() -> None:
    """At 80×24 the side panels are hidden and still fed every frame: a layout asked for
    by a hidden widget lays out the whole screen for nothing."""
    async with HiddenHost().run_test() as pilot:
        w = pilot.app.query_one(TextLines)
        await pilot.pause()
        calls: list[dict[str, Any]] = []
        real = w.refresh

        def spy(*regions: Any, **kw: Any) -> Any:
            calls.append(kw)
            return real(*regions, **kw)

        w.refresh = spy  # type: ignore[method-assign]
        for text in ("one", "one\ntwo", "a line long enough to wrap twice over\nthree"):
            w.update(text)
        assert not any(kw.get("layout") for kw in calls)
        pilot.app.query_one("#side").display = True
        await pilot.pause()
        assert [r.rstrip() for r in rows(w)] == [
            "a line long enough",
            "to wrap twice over",
            "three",
        ]
        calls.clear()
        w.update("a line long enough to wrap twice over\nthree\nfour")  # shown: as before
        assert calls == [{"layout": True}]
