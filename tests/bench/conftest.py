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
    from tui.engines.registry import ENGINE_KINDS, register

    register("pace", "pace_engine:PaceEngine", "test pace engine")
    yield
    ENGINE_KINDS.pop("pace", None)
