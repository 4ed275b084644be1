"""``infertop usage``: who used the servers, how much, since when — from the request ledger.

Reads the ledger (tui/ledger) that ``infertop proxy``, ``run``, ``bench`` and the TUI
write; groups a window's requests (``--by``) and prints a table, ``--json`` or ``--csv``.
Definitions: tui/ledger/usage.py; busy time is an attribution (tui/core/attribution.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time
from datetime import datetime
from typing import Any

from tui.cli.common import CLIError, fail

EPILOG = """\
Busy time (busy s) is an attribution: each instant an engine had requests in flight is
split equally among them, so a client's busy seconds add up, with everyone else's, to the
time the engine was busy. Joules are shown only where the ledger holds the device's energy.
Fingerprints (k:…) are keyed hashes of API keys with this installation's secret: never the
key, and not comparable across installations. Name them in config: [clients] "k:…" = "alice"
(`infertop usage --fingerprint < keyfile` gives a key's). --by verdict groups by why each
request took its time (queued, prefill-bound, cache-hit, ...: docs/engine-inside.md);
(none) where its place gave no verdict.
"""

SINCE_UNITS = {"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tui.ledger.usage import DIMENSIONS

    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "--since",
        default="7d",
        metavar="WHEN",
        help="from: a span back from now (30m, 24h, 7d, 2w) or a local date/time "
        "(2026-12-01, 2026-12-01T09:00); default 7d",
    )
    p.add_argument("--until", metavar="WHEN", help="to (same forms; default: now)")
    p.add_argument(
        "--by",
        action="append",
        metavar="DIM",
        help=f"group by one or more of {', '.join(DIMENSIONS)} (comma-separated or "
        "repeated; default client)",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object")
    out.add_argument("--csv", action="store_true", help="CSV, one row per group")
    p.add_argument("--ledger", metavar="PATH", help="the ledger file (default: config's)")
    p.add_argument(
        "--fingerprint",
        action="store_true",
        help="read an API key from stdin and print its fingerprint (for [clients]); "
        "nothing else is done",
    )
    p.add_argument("--explain", action="store_true", help="print SQLite's query plan too")


def parse_when(text: str, now: float) -> float:
    """A span back from ``now`` ("7d") or a local date or date-time → epoch seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*", text)
    if m:
        return now - float(m.group(1)) * SINCE_UNITS[m.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise CLIError(
            f"{text!r}: not a time (30m, 24h, 7d, 2w, 2026-12-01 or 2026-12-01T09:00)"
        ) from None


def parse_by(values: list[str] | None) -> tuple[Any, ...]:
    from tui.ledger.usage import DIMENSIONS

    dims: list[Any] = []
    for value in values or ["client"]:
        for part in value.split(","):
            part = part.strip()
            if part not in DIMENSIONS:
                raise CLIError(f"--by {part!r}: one of {', '.join(DIMENSIONS)}")
            if part not in dims:
                dims.append(part)
    return tuple(dims)


def main(args: argparse.Namespace) -> int:
    if args.fingerprint:
        return _fingerprint(args)
    from tui.cli.common import load
    from tui.cli.ledger_args import ledger_path
    from tui.ledger.store import LedgerError, connect
    from tui.ledger.usage import query_plan, summarize, texts_of, window_of

    try:
        cfg = load(args)
        now = time.time()
        since = parse_when(args.since, now)
        until = parse_when(args.until, now) if args.until else now
        if until <= since:
            raise CLIError("--until must be after --since")
        by = parse_by(args.by)
        args.no_ledger = False
        path = ledger_path(args, cfg)
        if path is None:
            raise CLIError("the ledger is off in config ([ledger] enabled = false)")
        con = connect(path, create=False)
    except CLIError as e:
        return fail(str(e), e.code)
    except LedgerError as e:
        return fail(str(e), 1)
    try:
        _pack(con)
        t_query = time.perf_counter()
        window = window_of(con, since, until)
        result = summarize(window, texts_of(con), by)
        took = time.perf_counter() - t_query
        plan = query_plan(con) if args.explain else None
    finally:
        con.close()
    if args.json:
        d = result.to_dict()
        d["ledger"] = str(path)
        d["read"] = _read(window)
        if plan is not None:
            d["query_plan"] = plan
        print(json_text(d))
    elif args.csv:
        _csv(result)
    else:
        print(format_table(result, str(path)))
        if plan is not None:
            print("query plan: " + " · ".join(plan))
        r = _read(window)
        print(
            f"({r['requests']} requests read in {took * 1000:.0f} ms: {r['packed_requests']} "
            f"from {r['packed_hours']} hour packs, {r['row_requests']} from rows)",
            file=sys.stderr,
        )
    return 0


def json_text(d: dict[str, Any]) -> str:
    """``d`` as JSON: a key a line, each group of a list on one line of its own —
    readable, and encoded by the json module's C encoder (``indent`` would take the
    pure-Python one: a quarter of a second for 2,000 groups)."""
    lines = []
    for key, value in d.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            items = ",\n    ".join(json.dumps(v) for v in value)
            text = f"[\n    {items}\n  ]"
        else:
            text = json.dumps(value)
        lines.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}"


def _read(window: Any) -> dict[str, int]:
    """Where a window's requests were read from (``--json``'s ``read``)."""
    return {
        "requests": window.packed_requests + window.row_requests,
        "packed_hours": window.packed_hours,
        "packed_requests": window.packed_requests,
        "row_requests": window.row_requests,
    }


def _pack(con: Any) -> None:
    """Pack the ledger's hours that are due (tui/ledger/shares.py) before reading: once
    after an upgrade it may take a while (said on stderr); a ledger this process may
    not write is read as it is (the hours not packed from the rows)."""
    import sqlite3

    from tui.ledger.shares import pack_due

    said = [0.0]
    t0 = time.monotonic()

    def progress(done: int, due: int) -> None:
        now = time.monotonic()
        if now - t0 > 1.0 and now - said[0] > 1.0 and sys.stderr.isatty():
            said[0] = now
            print(f"\rpacking the ledger's hours: {done} of {due}", end="", file=sys.stderr)

    try:
        pack_due(con, progress=progress)
    except sqlite3.Error as e:
        print(f"infertop: hours not packed ({e}): read from the rows", file=sys.stderr)
    if said[0]:
        print(file=sys.stderr)


def _fingerprint(args: argparse.Namespace) -> int:
    from tui.cli.common import load
    from tui.cli.ledger_args import client_keys

    try:
        cfg = load(args)
    except CLIError as e:
        return fail(str(e), e.code)
    keys = client_keys(cfg, lambda text: print(f"infertop: {text}", file=sys.stderr))
    if keys is None:
        return fail("fingerprints are off ([ledger] fingerprints = false)", 1)
    key = sys.stdin.buffer.read(64 * 1024).strip()
    if not key:
        return fail("no key on stdin (e.g. `infertop usage --fingerprint < keyfile`)")
    print(keys.fingerprint(key))
    return 0


CSV_UNSAFE = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> Any:
    """A cell a spreadsheet will not run: text starting like a formula gets a quote."""
    if isinstance(value, str) and value.startswith(CSV_UNSAFE):
        return "'" + value
    return value


def _csv(result: Any) -> None:
    rows = [g.to_dict(result.by) for g in result.groups]
    names = list(rows[0]) if rows else [*result.by, *result.total.to_dict(()).keys()]
    w = csv.writer(sys.stdout)
    w.writerow(names)
    for row in rows:
        w.writerow([_csv_cell(row.get(k)) for k in names])


def _n(value: int) -> str:
    return f"{value:,}"


def _s(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.0f}ms" if value < 10 else f"{value:.1f}s"


def format_table(result: Any, where: str) -> str:
    """The table ``infertop usage`` prints (client names terminal-safe, cut to 32)."""
    from tui.core.safe_text import terminal_label

    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(result.since))
    until = time.strftime("%Y-%m-%d %H:%M", time.localtime(result.until))
    head = [*(d for d in result.by)]
    head += ["reqs", "fail", "prompt", "cached", "output", "reason", "TTFT p50/p95"]
    head += ["TTFO p50", "tok/s p50", "busy s", "J"]
    rows: list[list[str]] = []
    for g in [*result.groups, result.total]:
        d = g.to_dict(result.by if g is not result.total else ())
        labels = [terminal_label(k, 32) for k in g.key] if g.key else ["total"]
        labels += [""] * (len(result.by) - len(labels))
        est = "~" if d["output_estimated"] else ""
        rows.append(
            [
                *labels,
                _n(d["requests"]),
                _n(d["failed"]),
                _n(d["prompt_tokens"]),
                _n(d["cached_tokens"]),
                est + _n(d["output_tokens"]),
                _n(d["reasoning_tokens"]),
                f"{_s(d['ttft_p50_s'])}/{_s(d['ttft_p95_s'])}",
                _s(d["ttfo_p50_s"]),
                "–" if d["decode_tps_p50"] is None else f"{d['decode_tps_p50']:.1f}",
                f"{d['busy_s']:.1f}",
                "–" if d["joules"] is None else f"{d['joules']:.0f}",
            ]
        )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    text_cols = max(len(result.by), 1)

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < text_cols else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    lines = [f"usage {since} → {until} (ledger {terminal_label(where, 200)})", line(head)]
    lines += [line(r) for r in rows]
    lines.append(
        f"busy s: an attribution (each busy instant split among the requests in flight); "
        f"engines busy {result.busy_wall_s:.1f} s in all. ~: output counted from chunks."
    )
    return "\n".join(lines)
