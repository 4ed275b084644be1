"""``infertop`` with no subcommand: the terminal UI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TELEMETRY_HELP = (
    "whose hardware the panel shows: 'local' (default), ssh://[user@]host[:port] (runs "
    "`infertop agent` there, or its code on the remote python3, through your own ssh) or "
    "an exporter URL http(s)://HOST:PORT[/metrics] (DCGM, node_exporter, nvitop); an "
    "engine's own `telemetry` in config wins"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The TUI's options (on the top-level parser: ``infertop --telemetry SOURCE``)."""
    parser.add_argument("--telemetry", dest="ui_telemetry", metavar="SOURCE", help=TELEMETRY_HELP)


# Frames per second Textual may draw (it reads TEXTUAL_FPS when first imported). 30 keeps
# streaming smooth while halving the bytes sent per second (matters over SSH, and for CPU).
DEFAULT_FPS = "30"


def prepare_terminal_ui() -> None:
    """Settings that must be in place before Textual is imported (user env wins)."""
    import os

    os.environ.setdefault("TEXTUAL_FPS", DEFAULT_FPS)


def engine_log_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("infertop")) / "engine-stderr.log"


def main(args: argparse.Namespace) -> int:
    from tui.config import ConfigError, load_config
    from tui.telemetry.sources import SourceError, parse_source

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as e:
        print(f"infertop: {e}", file=sys.stderr)
        return 2
    telemetry = getattr(args, "ui_telemetry", None)
    if telemetry is not None:
        try:
            parse_source(telemetry)
        except SourceError as e:
            print(f"infertop: error: --telemetry: {e}", file=sys.stderr)
            return 2
    prepare_terminal_ui()
    from tui.app.app import create_app, default_state_file
    from tui.app.terminal import engine_stderr_to

    app = create_app(config, state_path=default_state_file(), telemetry_source=telemetry)
    with engine_stderr_to(engine_log_path()):
        app.run()
    return int(app.return_code or 0)
