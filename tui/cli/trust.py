"""``infertop trust [PATH]``: use a config file found in the current folder.

A ``./infertop.toml`` is used only once trusted (by path and content hash: an edit needs
a new ``trust``), because a config can send API keys (``api_key_env``, ``headers``) to the
URL it names and run the program in ``options.binary``. Before it trusts a file this
command checks that it is a valid config and prints what in it can send a secret or run
a program, so the user sees what they agree to.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tui.core.safe_text import terminal_label

TRUST_HELP = (
    "A ./infertop.toml in the current folder is ignored until you trust it (a config can "
    "send API keys to the URLs it names and run programs). `infertop trust` records the "
    "file's path and content hash in your config folder; an edited file must be trusted "
    "again. --config PATH and $INFERTOP_CONFIG are always used: you named them."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = TRUST_HELP
    p.add_argument(
        "path",
        nargs="?",
        default="infertop.toml",
        help="the config file (default: ./infertop.toml)",
    )
    p.add_argument("--remove", action="store_true", help="stop trusting the file")
    p.add_argument("--list", action="store_true", help="list the trusted files and exit")


def main(args: argparse.Namespace) -> int:
    from tui.config import ConfigError, parse_config
    from tui.config_trust import canonical, set_trust, trusted_files

    if args.list:
        for known, digest in sorted(trusted_files().items()):
            print(f"{terminal_label(known, 4000)}  sha256:{digest[:16]}")
        return 0
    path = Path(args.path).expanduser()
    try:
        if args.remove:
            store = set_trust(path, None)
            print(f"no longer trusted: {canonical(path)} ({store})")
            return 0
        content = path.read_bytes()
    except OSError as e:
        return _error(f"{path}: {e.strerror or e}")
    try:
        cfg = parse_config(content.decode("utf-8", errors="replace"), path)
    except ConfigError as e:
        return _error(f"not trusted: {e}")
    for line in powers(cfg):
        print(f"  {terminal_label(line, 2000)}")
    try:
        store = set_trust(path, content)
    except OSError as e:
        return _error(f"cannot write the trust store: {e.strerror or e}")
    print(f"trusted: {canonical(path)} (as it is now; recorded in {store})")
    return 0


def powers(cfg: Any) -> list[str]:
    """What the config can do beyond local defaults: where it sends which secret or
    header, which program it runs, where it reaches over ssh, where it writes sessions."""
    from tui.transport.access import redact_url

    out = []
    if cfg.session_dir:
        out.append(f"writes session logs (prompts and answers) to {cfg.session_dir}")
    for name, spec in cfg.engines.items():
        sent = [f"${spec.api_key_env}"] if spec.api_key_env else []
        sent += [f"header {h}" for h in spec.headers]
        if sent:
            where = redact_url(spec.url) if spec.url else "its server"
            out.append(f"engine {name}: sends {', '.join(sent)} to {where}")
        binary = spec.options.get("binary")
        if binary:
            out.append(f"engine {name}: runs the program {binary}")
        if spec.telemetry and spec.telemetry.startswith("ssh://"):
            out.append(f"engine {name}: connects with your ssh to {spec.telemetry}")
    return out


def _error(message: str) -> int:
    print(f"infertop trust: error: {terminal_label(message, 2000)}", file=sys.stderr)
    return 2
