"""Themes: built-in data files, switching, remembering, broken files, user folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.app_support import LOCAL, SIZE, gen
from tui.app.themes import ThemeFileError, builtin_theme_dir, load_theme_dirs, parse_theme


def test_builtin_themes_are_data_files_and_valid():
    loaded = load_theme_dirs([builtin_theme_dir()])
    names = sorted(t.name for t in loaded.themes)
    assert loaded.errors == []
    assert len(names) >= 3 and "infertop-dark" in names
    assert {p.stem for p in builtin_theme_dir().glob("*.toml")} == set(names)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("name = 'x'\nprimary = 'notacolour'\n", "is not a colour"),
        ("name = 'x'\n", "missing 'primary'"),
        ("name = 'x'\nprimary = '#fff'\nsparkle = 1\n", "unknown key 'sparkle'"),
        ("name = 'x\nprimary = '#fff'\n", "invalid TOML"),
        ("name = 'x'\nprimary = '#fff'\ndark = 'yes'\n", "'dark' must be bool"),
    ],
)
def test_bad_theme_files_name_the_problem(text, reason):
    with pytest.raises(ThemeFileError, match=reason):
        parse_theme(text, Path("bad.toml"))


async def test_theme_key_cycles_and_is_remembered(make_config, build_app, tmp_path):
    cfg = make_config(gen() + LOCAL)
    app = build_app(cfg, telemetry=False)
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == "infertop-dark"
        await pilot.press("ctrl+t")
        await pilot.pause()
        first = app.theme
        assert first != "infertop-dark" and first in app.our_themes
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme not in ("infertop-dark", first)
        chosen = app.theme
    assert f'theme = "{chosen}"' in (tmp_path / "state.toml").read_text()
    app2 = build_app(cfg)
    async with app2.run_test(size=SIZE):
        assert app2.theme == chosen


async def test_user_theme_folder_and_broken_theme_fallback(
    make_config, build_app, user_theme_dir, notes, wait_for
):
    (user_theme_dir / "mine.toml").write_text(
        'name = "mine"\nprimary = "#123456"\ndark = true\nbackground = "#000000"\n'
    )
    (user_theme_dir / "broken.toml").write_text('name = "broken"\nprimary = "#zzz"\n')
    cfg = make_config('[ui]\ntheme = "broken"\n' + gen() + LOCAL)
    app = build_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "mine" in app.available_themes and "mine" in app.our_themes
        assert app.theme == "infertop-dark"  # the broken one fell back to the default
        await wait_for(pilot, lambda: len(notes(app)) >= 2, 5)
        shown = notes(app)
        assert any("broken.toml" in n and "is not a colour" in n for n in shown)
        assert any("theme 'broken' not found" in n for n in shown)
