"""A crash of the TUI is always visible on the terminal (issue 48).

``infertop`` runs on a pseudo-terminal of its own, as a user starts it, with one change:
its chat screen raises an error right after its first paint (a crash forced for the
test; the markup crash of issue 48 is fixed, so it cannot serve). While the UI runs,
stderr goes to the engines' log, and before the fix Textual's traceback went there: the
app vanished, exit code 1, nothing said. Now, once Textual has restored the terminal,
the terminal reads the error's line and the log's path, and the log holds the traceback.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.app.app_support import SIZE
from tui.app.terminal import crash_lines

ERROR = "forced for the test [/]"
CRASHING = f"""
import sys
import tui.app.screens.chat as chat

shown = chat.ChatScreen.on_mount

def on_mount(self):
    shown(self)

    def boom():
        raise RuntimeError({ERROR!r})

    self.call_after_refresh(boom)

chat.ChatScreen.on_mount = on_mount
sys.argv = ["infertop", "--config", sys.argv[1]]
from tui.__main__ import main
sys.exit(main())
"""
ALT_SCREEN_OFF = b"\x1b[?1049l"  # Textual gives the terminal back


def run_on_a_terminal(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """Run ``args`` on a new pseudo-terminal of SIZE: (exit code, all it wrote)."""
    master, slave = pty.openpty()
    cols, rows = SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(
        args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal is closed, the app is gone
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    return proc.returncode, bytes(out)


def test_a_crash_says_its_error_and_its_log_on_the_terminal(cli_env, tmp_path: Path) -> None:
    cfg = tmp_path / "infertop.toml"
    cfg.write_text(
        'default_engine = "s"\n[engines.s]\nkind = "synthetic"\n[discovery]\nenabled = false\n'
    )
    state = tmp_path / "state"
    env = dict(cli_env, TERM="xterm-256color", XDG_STATE_HOME=str(state))
    env.pop("TEXTUAL_DRIVER", None)
    code, out = run_on_a_terminal([sys.executable, "-c", CRASHING, str(cfg)], env, 60)
    assert code == 1, out[-2000:]
    log = state / "infertop" / "engine-stderr.log"
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text())  # (Rich colours it)
    assert "Traceback" in traceback and f"RuntimeError: {ERROR}" in traceback
    assert ALT_SCREEN_OFF in out
    after = out[out.rindex(ALT_SCREEN_OFF) :].decode("utf-8", "replace")
    after = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", after)  # the terminal's modes restored
    said = [line.strip() for line in after.splitlines() if line.startswith("infertop:")]
    assert said == crash_lines(1, RuntimeError(ERROR), log), after[-2000:]
    assert said[0].endswith(f"RuntimeError: {ERROR} (exit code 1)")


def test_what_the_terminal_says_is_one_line_each_and_safe() -> None:
    first, second = crash_lines(1, ValueError("boom\n\x1b]0;owned\x07"), Path("/l/e.log"))
    assert first == "infertop: the terminal UI stopped on ValueError: boom ␛]0;owned␇ (exit code 1)"
    assert second == "infertop: its traceback is in /l/e.log"
    assert crash_lines(1, None, Path("x"))[0].startswith(
        "infertop: the terminal UI stopped on an error"
    )
