"""``infertop replay FILE``: play a recorded session back in the UI at its recorded pace."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from tui.core.safe_text import terminal_label


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a session .jsonl written by infertop")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="playback speed factor (default 1.0: as recorded)"
    )


class ReplayError(Exception):
    """A session file that cannot be replayed (message for the user)."""


def build_replay_app(path: Path, speed: float = 1.0, notes: list[str] | None = None):  # type: ignore[no-untyped-def]
    """The app ``infertop replay`` runs (the factory's app on a replay engine,
    autoplaying) and the numbers of the file's lines that were skipped; a line naming
    them and why goes to ``notes`` and to the app's start-up notifications."""
    from tui.app.app import create_app
    from tui.config import Config
    from tui.core.session import read_session
    from tui.engines.base import EngineSpec

    if not (speed > 0 and math.isfinite(speed)):  # (NaN is not > 0)
        raise ReplayError("--speed must be > 0")
    try:
        got = read_session(path)
    except OSError as e:
        raise ReplayError(f"cannot read {path}: {e.strerror}") from None
    if not got.records:
        why = f" ({got.describe_bad(path)})" if got.bad_lines else ""
        raise ReplayError(f"no requests recorded in {path}{why}")
    spec = EngineSpec(name="replay", kind="replay", options={"file": str(path), "speed": speed})
    config = Config(default_engine="replay", engines={"replay": spec})
    prompts = [str(r.get("prompt", "")) or "(empty prompt)" for r in got.records]
    app = create_app(config, record_session=False, autoplay=prompts, state_path=None)
    if got.bad_lines:
        skipped = got.describe_bad(path)
        app.startup_notes.append((skipped, "warning"))
        if notes is not None:
            notes.append(skipped)
    return app, got.bad_lines


def main(args: argparse.Namespace) -> int:
    from tui.cli.ui import engine_log_path, prepare_terminal_ui

    prepare_terminal_ui()
    from tui.app.terminal import engine_stderr_to

    notes: list[str] = []
    try:
        app, _bad = build_replay_app(Path(args.file), args.speed, notes)
    except ReplayError as e:
        print(f"infertop replay: {terminal_label(e, 2000)}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"infertop replay: {terminal_label(note, 2000)}", file=sys.stderr)
    with engine_stderr_to(engine_log_path()):
        app.run()
    return int(app.return_code or 0)
