"""``infertop fleet``: one row per inference endpoint, live (the fleet screen) or once.

Endpoints: ``--url`` (repeatable), else ``[fleet] urls`` in config, else every configured
engine with a url; plus every endpoint a Prometheus server scrapes (``--prometheus`` or
``[fleet] prometheus``). What each column means: tui/fleet/rows.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
from typing import TYPE_CHECKING

from tui.cli.common import INSECURE_HELP, CLIError, fail, load
from tui.core.safe_text import terminal_label

if TYPE_CHECKING:
    from tui.config import Config
    from tui.fleet.poller import Fleet
    from tui.fleet.rows import FleetSnapshot

ONCE_HELP = (
    "print one snapshot and exit. Rates and windowed percentiles need two readings: "
    "endpoints read directly are scraped twice, --gap seconds apart, and their rates cover "
    "that gap; rows read from Prometheus need one query (Prometheus holds the window)"
)


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0 or v > 86_400:
        raise argparse.ArgumentTypeError(f"must be > 0 and <= 86400 (got {text})")
    return v


EPILOG = """\
columns (over the window: between two scrapes, or Prometheus's [--window]):
  run, wait   requests running / waiting (vLLM num_requests_running / _waiting;
              llama-server requests_processing / requests_deferred)
  KV%         vLLM kv_cache_usage_perc x 100
  pfx%        prefix-cache hit rate: vLLM d(prefix_cache_hits) / d(prefix_cache_queries);
              llama-server d(prompt_tokens_cached) / d(cached + prompt_tokens)
  TTFT50/90   server-side time to first token, p50 / p90 of the window's histogram (vLLM)
  ITL50/90    inter-token latency, the same (vLLM)
  tok/s       generated tokens per second: d(generation_tokens_total) / dt
  GPU%, GPU mem, power   the host's GPUs from DCGM series in Prometheus
A value an endpoint does not report is "-" (null in --json), never made up.
Ollama reports up/down and its loaded models (/api/ps); any other OpenAI-compatible
server up/down and its model. Full definitions: tui/fleet/rows.py.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "--url",
        metavar="URL",
        action="append",
        default=[],
        help="an endpoint (repeatable); its kind is detected (vLLM, llama-server, Ollama, "
        "OpenAI-compatible)",
    )
    p.add_argument(
        "--prometheus",
        metavar="URL",
        help="a Prometheus server: every vLLM / llama-server it scrapes becomes a row, and "
        "GPUs come from its DCGM series (the same 25 HTTP requests per refresh whatever the "
        "fleet size)",
    )
    p.add_argument("--interval", type=_positive, metavar="S", help="refresh period (default 2)")
    p.add_argument(
        "--window",
        type=_positive,
        metavar="S",
        help="Prometheus: the range rates and percentiles cover (default 60; at least two "
        "of its scrape intervals)",
    )
    p.add_argument(
        "--timeout", type=_positive, metavar="S", help="per request to an endpoint (default 2)"
    )
    p.add_argument(
        "--telemetry",
        metavar="SOURCE",
        help="the hardware behind the endpoints given with --url or in config (an engine's "
        "own `telemetry` wins): local, ssh://[user@]host[:port] or an exporter URL; use it "
        "when they run on one box (a tunnel). Rows found through --prometheus take GPUs "
        "from its DCGM series",
    )
    p.add_argument("--once", action="store_true", help=ONCE_HELP)
    p.add_argument(
        "--gap",
        type=_positive,
        default=1.0,
        metavar="S",
        help="--once: seconds between the two scrapes (default 1)",
    )
    p.add_argument("--json", action="store_true", help="with --once: print the snapshot as JSON")
    p.add_argument(
        "--insecure", action="store_true", help=INSECURE_HELP.replace("with --url: ", "")
    )


def build_fleet(args: argparse.Namespace) -> tuple[Fleet, float, Config]:
    """(Fleet, refresh interval, config) from the arguments and config (the same builder
    as F3's, tui/fleet/build.py); CLIError when there is nothing to show."""
    from tui.fleet.build import NoFleet
    from tui.fleet.build import build_fleet as build

    cfg = load(args)
    if args.telemetry is not None:
        from tui.telemetry.sources import SourceError, parse_source

        try:
            parse_source(args.telemetry)
        except SourceError as e:
            raise CLIError(f"--telemetry: {e}") from None
    try:
        fleet = build(
            cfg,
            urls=args.url,
            prometheus=args.prometheus,
            telemetry=args.telemetry,
            window_s=args.window,
            timeout_s=args.timeout,
            verify_tls=not args.insecure,
        )
    except NoFleet as e:
        raise CLIError(str(e)) from None
    return fleet, args.interval or cfg.fleet.interval_s, cfg


def main(args: argparse.Namespace) -> int:
    if args.json and not args.once:
        return fail("--json prints one snapshot: add --once")
    try:
        fleet, interval, cfg = build_fleet(args)
    except CLIError as e:
        return fail(str(e), e.code)
    if args.once:
        try:
            snap = fleet.once(args.gap)
        finally:
            fleet.close()
        if args.json:
            print(json.dumps(snap.to_json(), indent=2))
        else:
            print(format_snapshot(snap, shutil.get_terminal_size((120, 24)).columns))
        return 0
    from tui.cli.ui import engine_log_path, prepare_terminal_ui

    prepare_terminal_ui()
    from tui.app.app import create_app, default_state_file
    from tui.app.terminal import engine_stderr_to
    from tui.cli.ledger_args import ledger_path

    app = create_app(
        cfg,
        state_path=default_state_file(),
        fleet=fleet,
        fleet_interval_s=interval,
        telemetry_source=args.telemetry,
        ledger=ledger_path(argparse.Namespace(), cfg),
    )
    try:
        with engine_stderr_to(engine_log_path()):
            app.run()
    finally:
        fleet.close()
    return int(app.return_code or 0)


def format_snapshot(snap: FleetSnapshot, width: int) -> str:
    """The text ``--once`` prints: the table, then each row's error in full."""
    from tui.fleet.columns import text_table

    lines = [text_table(snap.rows, width)]
    notes = [f"{r.name}: {'down' if not r.up else 'up'}: {r.error}" for r in snap.rows if r.error]
    notes += [
        f"{r.name}: hardware {r.hardware}: {r.hardware_error}"
        for r in snap.rows
        if r.hardware_error
    ]
    from tui.fleet.columns import top_clients_text

    notes += [f"{r.name}: {top_clients_text(r.top_clients)}" for r in snap.rows if r.top_clients]
    if notes:
        lines += ["", *notes]
    if snap.prometheus_error:
        lines.append(f"prometheus: {snap.prometheus_error}")
    if not snap.rows:
        lines.append("(no endpoints)")
    # errors quote servers and Prometheus: each note one terminal-safe line (the table's
    # cells already are)
    return "\n".join([lines[0], *(terminal_label(line, 4000) for line in lines[1:])])
