"""``infertop proxy``: watch other clients' inference by standing between them and a server.

This module is the command: it makes the proxy's parts from the options and config (the
OTLP exporter and alert rules, the ledger, the ``--energy`` sampler) and runs it, closing
them after. Headless by default (no Textual import): it forwards, measures and exports
until Ctrl+C. ``--ui`` also opens the requests view in this terminal — the proxy then runs
as a child process of its own, so drawing the screen never holds up a byte being forwarded
(one Python process would share one GIL between them). Its options and the config they
make: :mod:`tui.cli.proxy_args`; the headless run: :mod:`tui.cli.proxy_serve`; ``--ui``:
:mod:`tui.cli.proxy_ui`. Details: docs/proxy.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tui.cli.common import CLIError, fail
from tui.cli.proxy_args import add_arguments, build_config
from tui.cli.proxy_serve import serve
from tui.cli.proxy_ui import with_ui

__all__ = ["add_arguments", "main"]


def main(args: argparse.Namespace) -> int:
    from tui.cli.common import load

    try:
        cfg = load(args)
        config, evidence = build_config(args, cfg)
    except CLIError as e:
        return fail(str(e), e.code)
    if args.ui:
        return with_ui(args, config, cfg)
    from tui.cli.handoff import build_handoff, note_line
    from tui.cli.ledger_args import client_keys, open_ledger, say
    from tui.core.sched_slice import request_slice

    slice_ns = round(args.slice_ms * 1e6)  # first: the threads made after inherit it
    sched = (
        request_slice(slice_ns).describe() if slice_ns else "the kernel's default (--slice-ms 0)"
    )
    note = say("infertop proxy")
    try:
        handoff = build_handoff(
            args,
            cfg,
            note=note_line("infertop proxy"),
            on_line=_alert_line,
            upstream=config.upstream,
            own_requests=False,
        )
    except CLIError as e:
        return fail(str(e), e.code)
    config.trace = "propagate" if handoff.propagate else "record" if handoff.recording else "off"
    config.client_keys = client_keys(cfg, note)
    sink = open_ledger(args, cfg, note)
    try:
        energy = _energy_feed(args.energy, cfg, sink, config.upstream, note)
    except CLIError as e:
        handoff.close()
        return fail(str(e), e.code)
    try:
        return serve(config, evidence, log=args.log, sched=sched, sink=sink, handoff=handoff)
    finally:
        if energy is not None:
            energy[0].stop()
            energy[1].stop()
        handoff.close()


def _alert_line(text: str, bell: bool) -> None:
    from tui.core.safe_text import terminal_label

    print(f"infertop proxy: {terminal_label(text, 1000)}", file=sys.stderr, flush=True)


def _energy_feed(source: str | None, cfg: Any, sink: Any, upstream: str, note: Any) -> Any:
    """--energy: a sampler of that hardware and the feed of its energy into the ledger
    (tui/ledger/energy_feed.py), started; None without --energy or a ledger."""
    if not source:
        return None
    if sink is None:
        note("--energy: no ledger to keep the energy in (it is off)")
        return None
    from tui.ledger.energy_feed import EnergyFeed, track_window
    from tui.telemetry.sampler import TelemetrySampler
    from tui.telemetry.sources import SourceError, open_source, parse_source

    try:
        spec = parse_source(source)
    except SourceError as e:
        raise CLIError(f"--energy: {e}") from None
    t = cfg.telemetry
    sampler = TelemetrySampler(t.interval_s, source=open_source(spec, t.interval_s, t.gpu))
    sampler.start()
    track = sampler.energy
    feed = EnergyFeed(sink, lambda: upstream, track_window(track), track.latest_t)
    feed.start()
    note(f"energy: {spec.label} sampled every {t.interval_s:g} s for the ledger's joules")
    return sampler, feed
