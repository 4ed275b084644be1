"""Fixtures for UI tests: configs, the app built by the CLI's own factory, waiting.

Every UI test uses a fixed terminal size (``SIZE`` unless it says otherwise).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tui.app.app import InfertopApp, create_app
from tui.app.themes import builtin_theme_dir
from tui.config import Config, parse_config


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[[str], Config]:
    def make(text: str) -> Config:
        path = tmp_path / "infertop.toml"
        path.write_text(text)
        return parse_config(text, path)

    return make


@pytest.fixture
def user_theme_dir(tmp_path: Path) -> Path:
    d = tmp_path / "user-themes"
    d.mkdir()
    return d


@pytest.fixture
def build_app(tmp_path: Path, user_theme_dir: Path) -> Callable[..., InfertopApp]:
    def build(config: Config, **kw) -> InfertopApp:  # type: ignore[no-untyped-def]
        kw.setdefault("session_path", tmp_path / "session.jsonl")
        kw.setdefault("state_path", tmp_path / "state.toml")
        kw.setdefault("theme_dirs", [builtin_theme_dir(), user_theme_dir])
        kw.setdefault("telemetry", False)
        # no probing of this machine's default ports unless a test asks (discover=None:
        # as its config says, with its own servers' ports in [discovery] ports)
        kw.setdefault("discover", False)
        return create_app(config, **kw)

    return build


async def _wait_for(pilot, predicate: Callable[[], bool], timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await pilot.pause(0.05)


@pytest.fixture
def wait_for():  # type: ignore[no-untyped-def]
    """``await wait_for(pilot, predicate, timeout)``: poll while the app keeps running."""
    return _wait_for


def notifications(app: InfertopApp) -> list[str]:
    return [n.message for n in app._notifications]


@pytest.fixture
def notes():  # type: ignore[no-untyped-def]
    return notifications


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``INFERTOP_TEXTUAL_PRIVATE=0`` (scripts/test.sh's second run of the
    ``private_paths`` tests) a test of a fast path itself has nothing to test."""
    from tui.app.textual_private import SWITCH

    if os.environ.get(SWITCH, "").strip() != "0":
        return
    off = pytest.mark.skip(reason=f"tests a Textual fast path, off here ({SWITCH}=0)")
    for item in items:
        if item.get_closest_marker("fast_paths") is not None:
            item.add_marker(off)


@pytest.fixture(autouse=True)
def fast_paths_decided_per_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's app start (or first use) decides the Textual fast paths anew
    (tui/app/textual_private), so a test that turned them off leaves no later one off."""
    from tui.app import textual_private

    monkeypatch.setattr(textual_private, "_decided", None)
