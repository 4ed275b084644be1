"""Fixtures for the remote-hardware tests: a real sshd on loopback, exporter pages."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.sshd_server import SSHD, Sshd


@pytest.fixture
def sshd_server(tmp_path: Path) -> Iterator[Callable[[str], Sshd]]:
    """``sshd_server(remote_path)``: a started sshd whose sessions get that PATH."""
    if not os.path.exists(SSHD) or not shutil.which("ssh"):
        pytest.fail("sshd/ssh missing: run scripts/setup-e2e.sh")
    started: list[Sshd] = []

    def start(remote_path: str) -> Sshd:
        server = Sshd(tmp_path / f"sshd{len(started)}", remote_path)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
