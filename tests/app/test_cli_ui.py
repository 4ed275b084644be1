"""The `infertop` command's UI entry: bad config is one plain line, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys


def test_bad_config_one_line_error(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[ui]\ntheme = 3\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ui.theme" in lines[0] and "Traceback" not in proc.stderr


def test_replay_help_lists_the_subcommand():
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "replay" in proc.stdout
