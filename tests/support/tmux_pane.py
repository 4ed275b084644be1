"""A tmux server of its own (``-L NAME``) for end-to-end tests: run commands, read the pane."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


class Tmux:
    def __init__(self, socket_name: str) -> None:
        self.base = ["tmux", "-L", socket_name]

    def __call__(self, *args: str) -> str:
        return _run(*self.base, *args)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "e2e")

    def wait(self, pred: Callable[[str], object], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if pred(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; screen:\n{text}")
            time.sleep(0.1)
