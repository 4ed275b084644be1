"""``infertop`` with no subcommand: the terminal UI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui.config import Config

TELEMETRY_HELP = (
    "whose hardware the panel shows: 'local' (default), ssh://[user@]host[:port] (runs "
    "`infertop agent` there, or its code on the remote python3, through your own ssh) or "
    "an exporter URL http(s)://HOST:PORT[/metrics] (DCGM, node_exporter, nvitop); an "
    "engine's own `telemetry` in config wins"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The TUI's options (on the top-level parser: ``infertop --telemetry SOURCE``)."""
    parser.add_argument("--telemetry", dest="ui_telemetry", metavar="SOURCE", help=TELEMETRY_HELP)
    parser.add_argument(
        "--url",
        dest="ui_url",
        metavar="URL",
        help="chat with the server at URL (a tunnel's local end, say); its kind is detected "
        "and it is added to the engines for this run (Ctrl+N still cycles through the rest)",
    )
    parser.add_argument(
        "--model",
        dest="ui_model",
        metavar="PATH",
        help="chat with the GGUF file at PATH, in-process (llama.cpp); it is added to the "
        "engines for this run as gguf:NAME (the palette's 'Open GGUF' lists the files "
        "found in the usual folders)",
    )
    parser.add_argument(
        "--watch",
        dest="ui_watch",
        metavar="URL",
        help="the requests view of a running `infertop proxy` at URL (its own address, or "
        "an ssh tunnel's local end): every client's requests, live",
    )
    from tui.cli.handoff import OTLP_HELP

    parser.add_argument("--otlp", dest="ui_otlp", metavar="URL", help=OTLP_HELP)
    parser.add_argument(
        "--trace-propagation",
        dest="ui_trace_propagation",
        action="store_true",
        help="send a W3C traceparent with each request, so the engine's own span joins "
        "infertop's trace (default: [otel] trace_propagation)",
    )
    parser.add_argument(
        "--capture-content",
        dest="ui_capture_content",
        action="store_true",
        help="with --otlp: put your prompt and the answer on each request's span",
    )
    parser.add_argument(
        "--insecure",
        dest="ui_insecure",
        action="store_true",
        help="with --url: accept a TLS certificate that cannot be verified",
    )
    from tui.cli.ledger_args import add_ledger_arguments

    add_ledger_arguments(parser, "ui_")


# Frames per second Textual may draw (it reads TEXTUAL_FPS when first imported). 30 keeps
# streaming smooth while halving the bytes sent per second (matters over SSH, and for CPU).
DEFAULT_FPS = "30"


def prepare_terminal_ui() -> None:
    """Settings that must be in place before Textual is imported (user env wins), and
    the terminal's size taken from the terminal.

    COLUMNS and LINES in the environment (a shell that exports them, a parent process
    that set them) win over the terminal in ``shutil.get_terminal_size``, which Textual
    asks on every resize: the UI would keep the size it started with. When stdout is a
    terminal they are dropped, so the terminal (ioctl) says its size."""
    import os

    os.environ.setdefault("TEXTUAL_FPS", DEFAULT_FPS)
    if sys.stdout.isatty():
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)


def engine_log_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("infertop")) / "engine-stderr.log"


def model_engine(config: Config, model: str) -> str | None:
    """``--model PATH``: the engine running that GGUF in-process, added to ``config``
    (None, with a one-line error printed, when PATH is no readable GGUF)."""
    from tui.chat.catalog import gguf_engine
    from tui.engines.base import EngineError
    from tui.engines.files.gguf import check_gguf

    path = Path(model).expanduser().resolve()
    try:
        check_gguf(path)
    except EngineError as e:
        print(f"infertop: error: --model: {e}", file=sys.stderr)
        return None
    return gguf_engine(config, path)


def main(args: argparse.Namespace) -> int:
    from tui.config import ConfigError, load_config
    from tui.telemetry.sources import SourceError, parse_source

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as e:
        print(f"infertop: {e}", file=sys.stderr)
        return 2
    from tui.cli.common import show_notices

    show_notices(config)  # (the app shows them too, once it is up)
    telemetry = getattr(args, "ui_telemetry", None)
    if telemetry is not None:
        try:
            parse_source(telemetry)
        except SourceError as e:
            print(f"infertop: error: --telemetry: {e}", file=sys.stderr)
            return 2
    engine = None
    url = getattr(args, "ui_url", None)
    if url:
        from tui.engines.base import EngineError
        from tui.engines.servers.detect import spec_from_url

        try:
            spec = spec_from_url(url, verify_tls=not getattr(args, "ui_insecure", False))
        except EngineError as e:
            print(f"infertop: error: --url: {e}", file=sys.stderr)
            return 1
        config.engines[spec.name] = spec
        engine = spec.name
    model = getattr(args, "ui_model", None)
    if model:
        if url:
            print("infertop: error: --model and --url: give one of them", file=sys.stderr)
            return 2
        engine = model_engine(config, model)
        if engine is None:
            return 1
    watch = getattr(args, "ui_watch", None)
    if watch is not None:
        from tui.proxy.watch import ProxyWatch, WatchError

        try:
            ProxyWatch(watch)  # checks the URL; the view attaches once it is up
        except WatchError as e:
            print(f"infertop: error: {e}", file=sys.stderr)
            return 2
    from tui.cli.common import CLIError
    from tui.cli.handoff import build_handoff, note_line
    from tui.cli.ledger_args import ledger_path

    try:
        handoff = build_handoff(
            argparse.Namespace(
                otlp=getattr(args, "ui_otlp", None),
                trace_propagation=getattr(args, "ui_trace_propagation", False),
                capture_content=getattr(args, "ui_capture_content", False),
            ),
            config,
            note=note_line("infertop"),
            upstream=config.engines[engine or config.default_engine].url,
        )
    except CLIError as e:
        print(f"infertop: error: {e}", file=sys.stderr)
        return e.code
    prepare_terminal_ui()
    from tui.app.app import create_app, default_state_file
    from tui.app.terminal import engine_stderr_to

    try:
        app = create_app(
            config,
            state_path=default_state_file(),
            telemetry_source=telemetry,
            engine=engine,
            watch=watch,
            ledger=ledger_path(args, config, "ui_"),
            handoff=handoff,
        )
        with engine_stderr_to(engine_log_path()):
            app.run()
    finally:
        handoff.close()
    return int(app.return_code or 0)
