"""Themes as data files: TOML in ``themes/`` (built-in) and the user theme folder.

A theme file holds Textual ``Theme`` fields (name, primary, secondary, accent,
foreground, background, surface, panel, success, warning, error, boost, dark,
luminosity_spread, text_alpha) and an optional ``[variables]`` table. A file that is not
valid TOML, has an unknown key, misses ``name``/``primary`` or has a bad colour is
reported (file and reason) and skipped; the app then falls back to the default theme.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import Theme

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_THEME = "infertop-dark"
_COLOUR_KEYS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
_OTHER_KEYS = {"name": str, "dark": bool, "luminosity_spread": float, "text_alpha": float}


class ThemeFileError(Exception):
    """A theme file that cannot be used; the message names the file and the reason."""


@dataclass
class ThemeLoad:
    themes: list[Theme]
    errors: list[str]


def builtin_theme_dir() -> Path:
    """The repository's themes/ folder (beside the tui package)."""
    return Path(__file__).resolve().parent.parent.parent / "themes"


def user_theme_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir("infertop")) / "themes"


def parse_theme(text: str, path: Path) -> Theme:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ThemeFileError(f"{path.name}: invalid TOML ({e})") from None
    kwargs: dict[str, object] = {}
    for key, value in data.items():
        if key == "variables":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise ThemeFileError(f"{path.name}: [variables] must map names to strings")
            kwargs["variables"] = dict(value)
        elif key in _COLOUR_KEYS:
            if not isinstance(value, str):
                raise ThemeFileError(f"{path.name}: '{key}' must be a colour string")
            try:
                Color.parse(value)
            except ColorParseError:
                raise ThemeFileError(f"{path.name}: '{key}' is not a colour ({value!r})") from None
            kwargs[key] = value
        elif key in _OTHER_KEYS:
            want = _OTHER_KEYS[key]
            ok = isinstance(value, want) or (want is float and isinstance(value, int))
            if not ok or (want is not bool and isinstance(value, bool)):
                raise ThemeFileError(f"{path.name}: '{key}' must be {want.__name__}")
            kwargs[key] = value
        else:
            raise ThemeFileError(f"{path.name}: unknown key '{key}'")
    for required in ("name", "primary"):
        if required not in kwargs:
            raise ThemeFileError(f"{path.name}: missing '{required}'")
    try:
        return Theme(**kwargs)  # type: ignore[arg-type]
    except Exception as e:  # Textual's own validation
        raise ThemeFileError(f"{path.name}: {e}") from None


def load_theme_dirs(dirs: list[Path]) -> ThemeLoad:
    """Every *.toml theme in ``dirs`` (later folders override earlier names)."""
    found: dict[str, Theme] = {}
    errors: list[str] = []
    for folder in dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = parse_theme(path.read_text(encoding="utf-8", errors="replace"), path)
            except (ThemeFileError, OSError) as e:
                errors.append(
                    f"theme {e}" if isinstance(e, ThemeFileError) else f"theme {path.name}: {e}"
                )
                continue
            found[theme.name] = theme
    return ThemeLoad(list(found.values()), errors)


def load_themes(
    app: App[None], dirs: list[Path], wanted: str | None
) -> tuple[list[str], list[str]]:
    """Register the themes in ``dirs`` with ``app`` and set ``wanted`` (else the default);
    returns (the names registered, notes for the user: broken theme files, a theme
    that was not found)."""
    loaded = load_theme_dirs(dirs)
    names: list[str] = []
    for theme in loaded.themes:
        app.register_theme(theme)
        names.append(theme.name)
    notes = [f"{err} — using the default theme instead" for err in loaded.errors]
    if wanted in app.available_themes:
        app.theme = wanted
    else:
        fallback = DEFAULT_THEME if DEFAULT_THEME in app.available_themes else "textual-dark"
        if wanted:
            notes.append(f"theme {wanted!r} not found — using {fallback}")
        app.theme = fallback
    return names, notes
