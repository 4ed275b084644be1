"""``infertop compare A B [C ...]``: how bench B differs from bench A, with intervals.

Exit status: 0 done; 2 bad input (a path that is not a report, fewer than two); 1 the
Markdown file could not be written. Imported to build the parser: keep it cheap.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tui.bench.report.shape import BenchReport

COLUMNS_HELP = (
    "Each row is one engine at one load level (matched by engine name, else by position; "
    "levels by label: c=1, c=8, rate=R, cold) and one metric: decode tok/s (median per "
    "request), TTFT (median), ITL p50 and p90 (pooled per-token gaps), total tok/s "
    "(output tokens / level wall time), and TTFO (median time to the first answer token "
    "or tool call) where both reports carry it and a reasoning model thought. Columns: "
    "A and B the two reports' values; B ÷ A their ratio; the 95 % interval is a "
    "percentile bootstrap (2000 resamples, seed 0) resampling requests on each side; "
    "change is 'no change' when the interval holds 1.0, "
    "else 'better' or 'worse' (higher tok/s, lower TTFT/TTFO/ITL is better). A warning lists "
    "every environment field that differs (CPU, GPU, versions, model file, settings). With "
    "more than two reports each is compared with the first."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = COLUMNS_HELP + " Exit status: 0 done, 2 bad input, 1 --out not written."
    p.add_argument(
        "reports",
        nargs="+",
        metavar="REPORT",
        help="bench report folders or report.json files; the first is the baseline A",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.add_argument("--out", metavar="FILE", help="also write the Markdown to FILE")
    p.add_argument(
        "--ui", action="store_true", help="open the two reports side by side in the terminal UI"
    )


def main(args: argparse.Namespace) -> int:
    from tui.bench.compare.markdown import markdown
    from tui.bench.compare.ratios import compare_reports
    from tui.bench.report.files import load_report

    paths = [Path(p).expanduser() for p in args.reports]
    if len(paths) < 2:
        return _error("compare needs two or more reports (got 1)")
    if args.ui and len(paths) != 2:
        return _error(f"--ui shows two reports side by side (got {len(paths)})")
    if args.ui and (args.json or args.out):
        return _error("--ui opens the terminal UI: leave out --json and --out")
    loaded = []
    for path in paths:
        try:
            loaded.append((path, load_report(path)))
        except ValueError as e:
            return _error(str(e))
    if args.ui:
        return _run_ui(loaded)
    try:
        result = compare_reports(loaded)
    except (TypeError, KeyError, AttributeError, ValueError, IndexError) as e:
        # load_report checked what compare reads; this is the last net for the rest
        names = ", ".join(str(p) for p in paths)
        return _error(f"{names}: a report holds something unexpected ({type(e).__name__}: {e})")
    text = markdown(result)
    if args.out:
        try:
            from tui.bench.report.atomic import write_atomic

            write_atomic(Path(args.out).expanduser(), text)
        except OSError as e:
            print(f"infertop compare: error: --out {args.out}: {e.strerror or e}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(result, indent=1, ensure_ascii=False))
    else:
        from tui.core.safe_text import terminal_safe

        print(terminal_safe(text), end="")  # reports from others name engines and models
    return 0


def _error(message: str) -> int:
    from tui.core.safe_text import terminal_label

    print(f"infertop compare: error: {terminal_label(message, 2000)}", file=sys.stderr)
    return 2


def _run_ui(loaded: list[tuple[Path, BenchReport]]) -> int:
    from tui.cli.ui import prepare_terminal_ui

    prepare_terminal_ui()
    from tui.app.screens.compare import CompareApp

    (pa, a), (pb, b) = loaded
    CompareApp(pa, a, pb, b).run()
    return 0
