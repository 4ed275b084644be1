"""Trust-boundary tests: a hostile server, planted modules, untrusted files.

``hostile`` is the base URL of tests/support/hostile_server.py (append ``/<mode>``).
``launcher`` runs infertop as its console script does: a script in a folder of its own,
so ``sys.path[0]`` is that folder and never the working directory (``python -m tui``
would itself import from the cwd, which is not how a user starts it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import hostile_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hostile_bench() -> Iterator[tuple[str, hostile_server.HostileServer]]:
    """(base URL, server) of a hostile server for this module."""
    port, server, stop = hostile_server.start_in_thread()
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        stop()


@pytest.fixture(scope="module")
def hostile(hostile_bench: tuple[str, hostile_server.HostileServer]) -> str:
    return hostile_bench[0]


@pytest.fixture
def launcher(tmp_path: Path) -> list[str]:
    """argv that starts infertop the way its installed console script does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "infertop"
    script.write_text("import sys\nfrom tui.__main__ import main\nsys.exit(main())\n")
    return [sys.executable, str(script)]


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """An environment with no user config, and an import path of the project root only
    (no empty entry: an empty PYTHONPATH entry means the working directory)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "INFERTOP"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    env["PYTHONPATH"] = str(ROOT)
    return env
