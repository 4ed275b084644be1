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


def test_url_that_answers_nothing_is_one_line(tmp_path):
    """`infertop --url URL` detects the server before the UI starts: a dead port is one
    line naming the URL's trouble, exit 1; `--url` before a subcommand is refused."""
    env = {"INFERTOP_CONFIG": "", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "--url", "http://127.0.0.1:9"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("infertop: error: --url:"), lines
    assert "127.0.0.1:9" in lines[0]
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "--url", "http://127.0.0.1:9", "run", "--prompt", "hi"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 2 and "put it after it" in proc.stderr
