"""Remembered UI state (last engine, last theme), written with tomli-w.

Kept apart from the user's config so the app never rewrites a hand-written file.
Default location: ``platformdirs.user_state_dir("infertop")/state.toml``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tomli_w

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def default_state_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("infertop")) / "state.toml"


@dataclass
class UIState:
    engine: str | None = None
    theme: str | None = None


def load_state(path: Path | None) -> UIState:
    """The remembered state; a missing or unreadable file gives an empty state."""
    if path is None or not path.is_file():
        return UIState()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return UIState()
    engine, theme = data.get("engine"), data.get("theme")
    return UIState(
        engine=engine if isinstance(engine, str) else None,
        theme=theme if isinstance(theme, str) else None,
    )


def save_state(path: Path | None, state: UIState) -> None:
    """Write the state atomically; a write failure is ignored (it is only a convenience)."""
    if path is None:
        return
    data = {k: v for k, v in (("engine", state.engine), ("theme", state.theme)) if v}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(tomli_w.dumps(data).encode("utf-8"))
        tmp.replace(path)
    except OSError:
        pass
