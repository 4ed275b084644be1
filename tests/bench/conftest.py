"""Bench test fixtures: the pace engine registered as kind "pace"."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture(autouse=True)
def pace_kind():
    import pace_engine

    from tui.engines.registry import ENGINE_KINDS, register

    register("pace", "pace_engine:PaceEngine", "test pace engine", pace_engine.OPTIONS)
    yield
    ENGINE_KINDS.pop("pace", None)


SUPPORT = HERE.parent / "support"
if SUPPORT.is_dir() and str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))


@pytest.fixture
def pace_server_url():
    """The issue-3 pace server (OpenAI SSE, known timing) factory: url(**PaceConfig)."""
    import pace_server

    stops = []

    def start(**kw) -> str:
        port, _server, stop = pace_server.start_in_thread(pace_server.PaceConfig(**kw))
        stops.append(stop)
        return f"http://127.0.0.1:{port}"

    yield start
    for stop in stops:
        stop()
