"""``--ledger PATH`` / ``--no-ledger`` for the commands that measure (proxy, run, bench,
the TUI), and opening the ledger they name: the request ledger is on by default
(``[ledger]`` in config; docs/ledger.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tui.config import Config
from tui.core.safe_text import terminal_label

LEDGER_HELP = (
    "the request ledger: one row per finished request, numbers and names only (default: "
    "[ledger] path in config, else the data folder's ledger.sqlite3; `infertop usage` "
    "reads it)"
)


def add_ledger_arguments(p: argparse.ArgumentParser, dest_prefix: str = "") -> None:
    p.add_argument("--ledger", metavar="PATH", dest=f"{dest_prefix}ledger", help=LEDGER_HELP)
    p.add_argument(
        "--no-ledger",
        action="store_true",
        dest=f"{dest_prefix}no_ledger",
        help="record nothing in the ledger this time",
    )


def ledger_path(args: argparse.Namespace, cfg: Config, dest_prefix: str = "") -> Path | None:
    """The ledger file the arguments and config name; None: turned off."""
    if getattr(args, f"{dest_prefix}no_ledger", False):
        return None
    given = getattr(args, f"{dest_prefix}ledger", None)
    if given:
        return Path(given).expanduser()
    if not cfg.ledger.enabled:
        return None
    if cfg.ledger.path:
        return Path(cfg.ledger.path).expanduser()
    from tui.ledger.store import default_ledger_path

    return default_ledger_path()


def say(prefix: str) -> Callable[[str], None]:
    """A note to stderr, terminal-safe (a path or an SQLite message may hold anything)."""

    def note(text: str) -> None:
        print(f"{prefix}: {terminal_label(text, 2000)}", file=sys.stderr, flush=True)

    return note


def open_ledger(
    args: argparse.Namespace,
    cfg: Config,
    note: Callable[[str], None],
    dest_prefix: str = "",
) -> Any:
    """The ledger's sink (tui/ledger/writer.py), or None when it is off or cannot be used
    — then ``note`` says why, once, and the command goes on without it."""
    path = ledger_path(args, cfg, dest_prefix)
    if path is None:
        return None
    from tui.ledger.retention import Retention
    from tui.ledger.store import LedgerError
    from tui.ledger.writer import LedgerSink

    s = cfg.ledger
    try:
        return LedgerSink(path, Retention(s.keep_days, s.max_mb), note, s.queue)
    except LedgerError as e:
        note(f"ledger off: {e}")
        return None


def client_keys(cfg: Config, note: Callable[[str], None]) -> Any:
    """The proxy's API-key fingerprints: this installation's secret (made on first use,
    0600 in the data folder) and config's ``[clients]`` names; None when fingerprints are
    off or the secret cannot be kept (``note`` says why)."""
    if not cfg.ledger.fingerprints:
        return None
    from tui.ledger.store import SECRET_FILE, data_dir
    from tui.proxy.identity import ClientKeys, load_secret

    path = data_dir() / SECRET_FILE
    try:
        secret = load_secret(path)
    except OSError as e:
        note(f"no key fingerprints: {path}: {e.strerror or e}")
        return None
    return ClientKeys(secret, dict(cfg.clients))
