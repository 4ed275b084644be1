"""``infertop agent``: print this machine's hardware samples as JSON lines on stdout.

What an SSH telemetry source runs on the remote host (tui/telemetry/remote/remote_ssh.py); the
line format is documented in tui/telemetry/devices/agent.py.
"""

from __future__ import annotations

import argparse


def _interval(text: str) -> float:
    from tui.telemetry.devices.agent import parse_interval

    try:
        return float(parse_interval(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--interval",
        type=_interval,
        default=0.5,
        metavar="S",
        help="seconds between samples (default 0.5)",
    )
    p.add_argument("--once", action="store_true", help="print one sample and exit")
    p.add_argument(
        "--no-gpu", action="store_true", help="leave GPUs out (no NVML, amdsmi, sysfs or ioreg)"
    )


def main(args: argparse.Namespace) -> int:
    from tui.telemetry.devices.agent import run

    return int(run(args.interval, args.once, not args.no_gpu))
