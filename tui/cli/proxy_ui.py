"""``infertop proxy --ui``: the headless proxy started as a child process of its own (so
drawing the screen never holds up a byte being forwarded: one Python process would share
one GIL between them), its announced URL awaited, then the requests view opened on it in
this terminal; the child stopped when the view closes. Its stderr goes to
:func:`proxy_log_path`.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

from tui.cli.common import fail
from tui.cli.proxy_serve import ANNOUNCE


def child_argv(args: argparse.Namespace, config: Any) -> list[str]:
    """The headless proxy this ``--ui`` run starts (the kind already detected)."""
    from tui.core.child_python import python_argv

    argv = [
        "proxy",
        "--upstream",
        config.upstream,
        "--listen",
        args.listen,
        "--kind",
        config.kind,
        "--max-body-mb",
        str(args.max_body_mb),
        "--body-budget-mb",
        str(args.body_budget_mb),
        "--max-clients",
        str(config.max_clients),
        "--read-timeout",
        str(args.read_timeout),
        "--slice-ms",
        str(args.slice_ms),
    ]
    if args.public:
        argv.append("--public")
    if args.max_clients_per_address is not None:
        argv += ["--max-clients-per-address", str(args.max_clients_per_address)]
    if args.events:
        argv += ["--events", str(Path(args.events).expanduser().resolve())]
    if args.no_engine_truth:
        argv.append("--no-engine-truth")
    if getattr(args, "config", None):
        argv = ["--config", str(Path(args.config).expanduser().resolve()), *argv]
    if args.no_ledger:
        argv.append("--no-ledger")
    elif args.ledger:
        argv += ["--ledger", str(Path(args.ledger).expanduser().resolve())]
    argv += ["--top-clients", str(config.top_clients)]
    if args.otlp:
        argv += ["--otlp", args.otlp]
    if args.trace_propagation:
        argv.append("--trace-propagation")
    if args.alerts:
        argv += ["--alerts", str(Path(args.alerts).expanduser().resolve())]
    return python_argv("tui", *argv)


def with_ui(args: argparse.Namespace, config: Any, cfg: Any) -> int:
    """Run the proxy ``config`` describes as a child (:func:`child_argv`) and the
    requests view on it here; the view's return code."""
    from tui.core.child_python import child_env, neutral_cwd

    log_path = proxy_log_path()
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        child = subprocess.Popen(
            child_argv(args, config),
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            env=child_env(),
            cwd=neutral_cwd(),
        )
    try:
        url = _announced(child)
        if url is None:
            return fail(f"the proxy did not start (its log: {log_path})", 1)
        from tui.cli.ui import engine_log_path, prepare_terminal_ui

        prepare_terminal_ui()
        from tui.app.app import create_app, default_state_file
        from tui.app.terminal import engine_stderr_to
        from tui.cli.ledger_args import ledger_path

        app = create_app(
            cfg,
            state_path=default_state_file(),
            telemetry_source=args.telemetry,
            watch=url,
            ledger=ledger_path(args, cfg),  # the proxy's: the usage screen reads its rows
        )
        with engine_stderr_to(engine_log_path()):
            app.run()
        return int(app.return_code or 0)
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(5)


def _announced(child: subprocess.Popen[bytes], timeout_s: float = 30.0) -> str | None:
    """The URL the child proxy prints once it listens (None: it exited or took too long)."""
    import threading

    found: list[str] = []

    def read() -> None:
        assert child.stdout is not None
        for raw in child.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith(ANNOUNCE):
                found.append(line[len(ANNOUNCE) :])
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout_s)
    return found[0] if found else None


def proxy_log_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("infertop")) / "proxy.log"
