"""``infertop`` with no subcommand: the terminal UI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:  # the default command has none
    return None


def engine_log_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("infertop")) / "engine-stderr.log"


def main(args: argparse.Namespace) -> int:
    from tui.config import ConfigError, load_config

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as e:
        print(f"infertop: {e}", file=sys.stderr)
        return 2
    from tui.app.app import create_app, default_paths
    from tui.app.terminal import engine_stderr_to

    app = create_app(config, **default_paths())
    with engine_stderr_to(engine_log_path()):
        app.run()
    return int(app.return_code or 0)
