"""The chat core's test fixture: a ChatCore on the test's event loop over synthetic
engines, each closed after the test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tui.chat.core import ChatCore
from tui.config import parse_config

# two in-process synthetic engines: exact pacing, failures on demand
TWO = (
    'default_engine = "s1"\n[generation]\nmax_tokens = 8\ntemperature = 0.0\n'
    '[engines.s1]\nkind = "synthetic"\noptions = { tokens_per_s = 400, ttft_ms = 5 }\n'
    '[engines.s2]\nkind = "synthetic"\noptions = { tokens_per_s = 400, ttft_ms = 5 }\n'
)


@pytest.fixture
def two() -> str:
    """The config text of :data:`TWO`, for tests that vary it."""
    return TWO


MakeCore = Callable[..., tuple[ChatCore, list[Any]]]


@pytest.fixture
async def chat() -> AsyncIterator[MakeCore]:
    """``chat(config_text=TWO, **ChatCore keywords)`` → (core, the events it told)."""
    made: list[ChatCore] = []

    def make(text: str = TWO, **kw: Any) -> tuple[ChatCore, list[Any]]:
        events: list[Any] = []
        core = ChatCore(parse_config(text, Path("t.toml")), events.append, **kw)
        made.append(core)
        return core, events

    yield make
    for core in made:
        await core.close()
