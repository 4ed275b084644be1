"""``infertop replay FILE``: play a recorded session back in the UI at its recorded pace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a session .jsonl written by infertop")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="playback speed factor (default 1.0: as recorded)"
    )


class ReplayError(Exception):
    """A session file that cannot be replayed (message for the user)."""


def build_replay_app(path: Path, speed: float = 1.0):  # type: ignore[no-untyped-def]
    """The app ``infertop replay`` runs: the factory's app on a replay engine, autoplaying."""
    from tui.app.app import create_app
    from tui.config import Config
    from tui.core.session import read_session
    from tui.engines.base import EngineSpec

    if speed <= 0:
        raise ReplayError("--speed must be > 0")
    try:
        got = read_session(path)
    except OSError as e:
        raise ReplayError(f"cannot read {path}: {e.strerror}") from None
    if not got.records:
        raise ReplayError(f"no requests recorded in {path}")
    spec = EngineSpec(name="replay", kind="replay", options={"file": str(path), "speed": speed})
    config = Config(default_engine="replay", engines={"replay": spec})
    prompts = [str(r.get("prompt", "")) or "(empty prompt)" for r in got.records]
    app = create_app(config, record_session=False, autoplay=prompts, state_path=None)
    return app, got.bad_lines


def main(args: argparse.Namespace) -> int:
    from tui.cli.ui import engine_log_path, prepare_terminal_ui

    prepare_terminal_ui()
    from tui.app.terminal import engine_stderr_to

    try:
        app, bad_lines = build_replay_app(Path(args.file), args.speed)
    except ReplayError as e:
        print(f"infertop replay: {e}", file=sys.stderr)
        return 2
    if bad_lines:
        print(f"infertop replay: skipping {len(bad_lines)} unreadable line(s)", file=sys.stderr)
    with engine_stderr_to(engine_log_path()):
        app.run()
    return int(app.return_code or 0)
