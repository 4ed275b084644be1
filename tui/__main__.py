"""The ``infertop`` command: the TUI by default, plus headless subcommands.

Each subcommand lives in ``tui/cli/<name>.py`` with ``add_arguments(parser)`` and
``main(args) -> int``; they are imported only to build the parser and must stay cheap
to import (no model loading, no Textual import).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tui import __version__

# subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("tui.cli.run", "stream one prompt headlessly and print its metrics"),
    "doctor": ("tui.cli.doctor", "say what was found (engines, model, GPU, config) and why"),
    "bench": ("tui.cli.bench", "benchmark engines: runs, medians, concurrency, cold vs warm"),
    "replay": ("tui.cli.replay", "play a recorded session back in the UI at its recorded pace"),
    "agent": ("tui.cli.agent", "print this machine's hardware samples as JSON lines (for SSH)"),
    "fleet": ("tui.cli.fleet", "one row per inference endpoint: load, KV cache, TTFT, tok/s, GPUs"),
    "compare": ("tui.cli.compare", "compare bench reports: B ÷ A ratios with bootstrap intervals"),
    "trust": ("tui.cli.trust", "use a ./infertop.toml: record it as trusted (path + content hash)"),
    "proxy": ("tui.cli.proxy", "forward other clients' requests to a server, measuring each"),
    "usage": ("tui.cli.usage", "who used the servers, how much: per client, model, day (ledger)"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; given ``command``, only that subcommand's options are built
    (the others keep their name and help line), so a subcommand's start-up imports only
    its own module."""
    parser = argparse.ArgumentParser(
        prog="infertop",
        description="Watch LLM inference happen: tokens stream beside TTFT, ITL and tok/s.",
        epilog="Run without a subcommand to start the terminal UI. A ./infertop.toml in the "
        "current folder is used only after `infertop trust` (it could send API keys or run "
        "programs); --config PATH and $INFERTOP_CONFIG are always used.",
    )
    parser.add_argument("--version", action="version", version=f"infertop {__version__}")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="config file (default: $INFERTOP_CONFIG, a trusted ./infertop.toml, then the "
        "user config folder)",
    )
    importlib.import_module("tui.cli.ui").add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if command is None or name == command:
            importlib.import_module(module_name).add_arguments(p)
    return parser


def chosen_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (the first word that is one and is not the value of
    a top-level option), or None."""
    takes_value = {
        flag
        for action in parser._actions  # argparse keeps no public list of them
        if action.option_strings and action.nargs != 0
        for flag in action.option_strings
    }
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--":
            return None
        elif word in SUBCOMMANDS:
            return word
        elif word.startswith("-"):
            skip = word in takes_value  # "--config=PATH" carries its own value
    return None


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(chosen_command(build_parser("ui"), words) or "ui")
    args = parser.parse_args(words)
    command = args.command or "ui"
    if command != "ui":
        for dest, flag in (
            ("ui_telemetry", "--telemetry"),
            ("ui_url", "--url"),
            ("ui_model", "--model"),
            ("ui_watch", "--watch"),
            ("ui_ledger", "--ledger"),
        ):
            if getattr(args, dest, None) is not None:
                parser.error(f"{flag} before {command!r} is the terminal UI's; put it after it")
        for dest, flag in (("ui_insecure", "--insecure"), ("ui_no_ledger", "--no-ledger")):
            if getattr(args, dest, False):
                parser.error(f"{flag} before {command!r} is the terminal UI's; put it after it")
    if command == "ui":
        module_name = "tui.cli.ui"
    else:
        module_name = SUBCOMMANDS[command][0]
    try:
        return int(importlib.import_module(module_name).main(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout closed early (e.g. `| head`): not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
