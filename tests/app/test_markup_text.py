"""The markup twin of the one text filter (tui/core/safe_text.py): text from outside is
shown as it is wherever Textual reads markup, and every such place in tui/app uses it.

- the round trip: any text, escaped by ``markup_safe``/``markup_label``, reads back as
  its terminal-safe self with no style, link or action (Hypothesis over brackets,
  backslashes and the characters of tags; Textual's own ``escape`` fails it: it leaves
  ``[ERROR]`` to be read as a style and eaten, and doubles a trailing backslash);
- the palette's lines and the A/B picker's list show a server's model names literally
  (Pilot, real widgets);
- a check of the source: no Textual widget in tui/app is handed a text that is not a
  constant in a place that reads markup unless it went through the filter.
"""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from textual.command import CommandList, CommandPalette
from textual.content import Content
from textual.widgets import OptionList

from tests.app.app_support import SYNTH, gen
from tui.app.screens.ab_picker import ABPicker
from tui.chat.catalog import Choice
from tui.core.safe_text import markup_label, markup_safe, terminal_label, terminal_safe
from tui.engines.servers.server_models import ServerModel

TUI_APP = Path(__file__).resolve().parents[2] / "tui" / "app"
# what a tag is made of, and what escapes one, plus a control character and a newline
TAGGY = st.text(alphabet="[]/\\@=$#'\"(){}:.,-_ abBlink1\x1b\n", max_size=40)
HOSTILE_MODELS = ["overloaded [/]", "[@click=app.quit]quit me[/]", "x [link=a:b]y"]


@settings(max_examples=3000, deadline=None)
@given(TAGGY)
def test_escaped_text_reads_back_as_itself(text: str) -> None:
    shown = Content.from_markup(markup_safe(text))
    assert shown.plain == terminal_safe(text) and shown.spans == []
    label = Content.from_markup(markup_label(text, 30))
    assert label.plain == terminal_label(text, 30) and label.spans == []
    # after markup of our own, the text is still itself
    ours = Content.from_markup(f"[b]engine:[/b] {markup_safe(text)}")
    assert ours.plain == f"engine: {terminal_safe(text)}" and len(ours.spans) == 1


async def test_palette_lines_and_the_ab_picker_show_model_names_as_they_are(  # type: ignore[no-untyped-def]
    make_config, build_app, wait_for
):
    app = build_app(make_config('default_engine = "synth"\n' + gen(4) + SYNTH))
    async with app.run_test(size=(100, 30)) as pilot:
        app.catalog.models["synth"] = [ServerModel(name) for name in HOSTILE_MODELS]
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), 10)
        await pilot.press(*"model a")
        palette = app.screen
        lines = palette.query_one(CommandList)
        want = {f"Model A: synth › {name}" for name in HOSTILE_MODELS}

        def listed() -> set[str]:
            shown = set()
            for i in range(lines.option_count):
                prompt = lines.get_option_at_index(i).prompt
                assert isinstance(prompt, Content)
                shown.add(prompt.plain)
                # only the query's highlight (one character each, a Style): no link,
                # action or style read from the name (markup gives a span its text)
                for span in prompt.spans:
                    assert span.end - span.start == 1 and not isinstance(span.style, str)
            return shown

        await wait_for(pilot, lambda: want <= listed(), 15)
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert app.is_running
        choices = [Choice("synth", name) for name in HOSTILE_MODELS]
        app.push_screen(ABPicker(choices))
        await pilot.pause(0.3)
        options = app.screen.query_one(OptionList)
        for i, name in enumerate(HOSTILE_MODELS):
            drawn = options.get_option_at_index(i).prompt
            shown = Content.from_markup(drawn) if isinstance(drawn, str) else drawn
            assert isinstance(shown, Content)
            assert shown.plain == f"  synth › {name}" and shown.spans == []
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert app.is_running and app.return_code is None


# -- the source check ---------------------------------------------------------------------
FILTERS = {"markup_safe", "markup_label", "Text", "Content"}  # escaped, or literal objects
WIDGETS = {"Static", "Label", "Option"}  # read a str as markup unless markup=False
TITLES = {"border_title", "border_subtitle"}  # always read a str as markup


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _safe(value: ast.AST) -> bool:
    """A constant, a call of the filter (or a literal Text/Content), or an f-string whose
    every value is one."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Call):
        return _name(value.func) in FILTERS
    if isinstance(value, ast.JoinedStr):
        return all(_safe(v.value) for v in value.values if isinstance(v, ast.FormattedValue))
    return False


def markup_places(source: str) -> list[tuple[int, str]]:
    """(line, what) for each place in ``source`` where text that is not a constant
    reaches a markup-reading Textual place without the filter."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in ("textual.markup", "rich.markup"):
            if any(a.name == "escape" for a in node.names):
                found.append((node.lineno, f"{node.module}.escape (not Textual's reader's)"))
        if isinstance(node, ast.Call) and _name(node.func) in WIDGETS and node.args:
            off = any(
                k.arg == "markup" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in node.keywords
            )
            if not off and not _safe(node.args[0]):
                found.append((node.lineno, f"{_name(node.func)}({ast.unparse(node.args[0])})"))
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr in TITLES:
                    if not _safe(node.value):
                        found.append((node.lineno, f"{target.attr} = {ast.unparse(node.value)}"))
    return found


def test_the_source_check_finds_what_it_is_for() -> None:
    bad = (
        "from textual.markup import escape\n"
        "Static(f'A: {path}')\n"
        "Label(name)\n"
        "w.border_title = f'metrics · {engine}'\n"
        "Option(label, id='1')\n"
    )
    assert sorted(line for line, _ in markup_places(bad)) == [1, 2, 3, 4, 5]
    good = (
        "Static(f'A: {path}', markup=False)\n"
        "Static('constant')\n"
        "w.border_title = markup_label(f'metrics · {engine}')\n"
        "w.border_title = f'hardware · {markup_label(host)}'\n"
        "Option(markup_label(label), id='1')\n"
        "Static(Text(name))\n"
    )
    assert markup_places(good) == []


def test_no_outside_text_reaches_markup_in_tui_app() -> None:
    bad = []
    for path in sorted(TUI_APP.rglob("*.py")):
        for line, what in markup_places(path.read_text(encoding="utf-8")):
            bad.append(f"{path.relative_to(TUI_APP.parent.parent)}:{line}: {what}")
    assert bad == [], "text reaches Textual's markup without the filter:\n" + "\n".join(bad)
