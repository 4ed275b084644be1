"""The request ledger at scale: ``infertop usage`` over 1,000,000 stored requests, the
query plans behind it, what the hour packs cost to write and keep, and the bytes a
request costs on disk.

A ledger is filled the way the proxy fills it — outcomes through the real writer
(tui/ledger/writer.py's ``write_batch``, batches of 512 in one transaction each, the
schema's triggers firing) — with --rows requests spread evenly over --days days (by
default 1,000,000 over the 90 days the ledger keeps by default: ~11,000 a day; with
``--days 7``, a busy shared server's week), from --clients clients (a Zipf-like mix: a
few busy, many rare), 4 models, 2 upstreams, 3 routes, half of them with an API-key
fingerprint; --verdicts of them (a share, 0 by default) with a verdict kind, a mix of
tui/core/verdict.py's kinds (what the bench's rows carry). Its hours are then packed
(tui/ledger/shares.py's ``pack_due``: what the writer does an hour at a time, and once
for a file upgraded from schema 2).

Measured, in one run, with the load average beside:

- **writing**: µs per request through ``write_batch`` into a ledger with the schema's
  triggers and into one without them (schema 2's write path), batches interleaved;
- **packing**: every hour at once (an upgrade) and one hour (the writer's steady state);
- **usage**, per window (24 h, 7 d, 30 d, all 90 d): in this process on a fresh
  connection each time, --repeat times, read from packs (the hours packed) and, once,
  every hour from the rows (the packs ignored: what they spare, as a ratio), and the
  whole command as a user runs it (``python -m tui usage … --json``: Python's start-up
  and imports included), --repeat times, interleaved with the in-process reads;
- SQLite's query plans (an index search for packs and rows, never a scan).

The workload is checked: the file holds --rows requests, each window's total equals the
rows SQL counts in it, every hour with requests is packed but the last ones, and the
numbers read from packs equal those read from the rows (sums exactly, busy to 1e-9).

    .venv/bin/python -m benchmarks.ledger_usage                  # 1M rows / 90 d (~4 min)
    .venv/bin/python -m benchmarks.ledger_usage --days 7         # 1M rows in one week
    .venv/bin/python -m benchmarks.ledger_usage --rows 100000    # a quick run
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import smoke
from tui.core.metrics import RequestMetrics
from tui.core.outcome import ClientIdentity, RequestOutcome
from tui.core.stats import percentile
from tui.core.verdict import VERDICT_KINDS, Breakdown, Verdict
from tui.ledger.shares import pack_due, read_window
from tui.ledger.store import connect
from tui.ledger.usage import query_plan, summarize, texts_of
from tui.ledger.writer import write_batch

MODELS = ("smollm2-135m", "qwen3-8b", "llama-3.1-8b-instruct", "gpt-oss-20b")
UPSTREAMS = ("http://127.0.0.1:8080", "http://10.0.0.7:8000")
ROUTES = (("/v1/chat/completions", "openai-chat"), ("/v1/messages", "anthropic"),
          ("/v1/responses", "openai-responses"))  # fmt: skip
PROGRAMS = ("openai-python", "anthropic-sdk (python)", "Claude Code", "Codex", "curl")
TRIGGERS = ("requests_added", "requests_removed", "requests_changed", "energy_added",
            "energy_removed")  # fmt: skip
ROOT = Path(__file__).resolve().parents[1]


def clients(n: int, rng: random.Random) -> list[ClientIdentity]:
    out = []
    for i in range(n):
        key = f"k:{rng.getrandbits(48):012x}" if i % 2 == 0 else None
        out.append(
            ClientIdentity(
                key_fingerprint=key,
                name=f"user{i}" if i < 5 else None,
                program=PROGRAMS[i % len(PROGRAMS)],
                process=f"python3[{1000 + i}]" if i % 3 == 0 else None,
                address="127.0.0.1" if i % 3 == 0 else f"10.0.{i // 250}.{i % 250}",
            )
        )
    return out


def outcome(
    i: int, t0: float, who: ClientIdentity, rng: random.Random, verdicts: float = 0.0
) -> RequestOutcome:
    m = RequestMetrics(ttft_ms=rng.uniform(40, 900), ttfr_ms=None, e2e_ms=None)
    out = rng.randint(16, 1024)
    m.prompt_tokens = rng.randint(20, 8000)
    m.output_tokens = out
    m.output_tokens_source = "usage"
    m.ttfo_ms = m.ttft_ms
    m.decode_tps = rng.uniform(20, 120)
    e2e = m.ttft_ms / 1000 + out / m.decode_tps
    m.e2e_ms = e2e * 1000
    m.itl_token_ms, m.itl_token_weights = [1000 / m.decode_tps] * 4, [1] * 4
    route, api = ROUTES[i % len(ROUTES)]
    return RequestOutcome(
        id=f"b-{i}",
        source="proxy",
        state="done" if i % 50 else "failed",
        route=route,
        api=api,
        upstream=UPSTREAMS[i % 2],
        model=MODELS[(i // 7) % len(MODELS)],
        client=who,
        t0_wall=t0,
        t0_ns=0,
        t_end_ns=int(e2e * 1e9),
        metrics=m,
        streamed=True,
        verdict=Verdict(rng.choice(VERDICT_KINDS), "", Breakdown())
        if verdicts and rng.random() < verdicts  # none: the same draws as before --verdicts
        else None,
    )


def workload(
    rows: int, days: float, n_clients: int, seed: int, now: float, verdicts: float = 0.0
) -> Any:
    """The requests, in batches of 512, as the writer would write them."""
    rng = random.Random(seed)
    who = clients(n_clients, rng)
    weights = [1 / (k + 1) for k in range(n_clients)]  # Zipf-like: a few busy, many rare
    picks = rng.choices(who, weights, k=rows)
    span = days * 86_400
    batch: list[RequestOutcome] = []
    for i in range(rows):
        batch.append(outcome(i, now - span + span * i / rows, picks[i], rng, verdicts))
        if len(batch) == 512:
            yield batch
            batch = []
    if batch:
        yield batch


def write_cost(work: Path, rows: int, now: float) -> None:
    """µs per request through write_batch with the triggers and without (schema 2's
    path), the same batches alternating between two fresh files."""
    cons = {"with triggers": connect(work / "w1.sqlite3"), "without": connect(work / "w2.sqlite3")}
    for name in TRIGGERS:
        cons["without"].execute(f"DROP TRIGGER {name}")
    took = dict.fromkeys(cons, 0.0)
    for k, batch in enumerate(workload(rows, 30, 2000, 11, now)):
        order = list(cons) if k % 2 == 0 else list(reversed(cons))
        for name in order:
            t = time.perf_counter()
            write_batch(cons[name], batch)  # type: ignore[arg-type]
            took[name] += time.perf_counter() - t
    for con in cons.values():
        con.close()
    w, wo = took["with triggers"], took["without"]
    print(
        f"write_batch ({rows:,} requests, 512 a transaction, interleaved): with the triggers "
        f"{w / rows * 1e6:.1f} µs/request ({rows / w:,.0f}/s), without (schema 2's path) "
        f"{wo / rows * 1e6:.1f} µs/request ({rows / wo:,.0f}/s): with ÷ without {w / wo:.3f}"
    )


def fill(
    path: Path,
    rows: int,
    days: float,
    n_clients: int,
    seed: int,
    now: float,
    verdicts: float = 0.0,
) -> float:
    con = connect(path)
    t = time.perf_counter()
    for batch in workload(rows, days, n_clients, seed, now, verdicts):
        write_batch(con, batch)  # type: ignore[arg-type]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return time.perf_counter() - t


def packing(path: Path, now: float) -> None:
    con = connect(path)
    t = time.perf_counter()
    hours = pack_due(con, now)
    took = time.perf_counter() - t
    n = int(con.execute("SELECT COALESCE(SUM(requests), 0) FROM packs").fetchone()[0])
    last = int(con.execute("SELECT MAX(hour) FROM packs").fetchone()[0])
    one = int(con.execute("SELECT requests FROM packs WHERE hour = ?", (last - 1,)).fetchone()[0])
    con.execute("DELETE FROM packs WHERE hour = ?", (last - 1,))
    t = time.perf_counter()
    assert pack_due(con, now) == 1
    hour = time.perf_counter() - t
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    print(
        f"packing every hour at once (an upgrade): {hours:,} hours, {n:,} requests in "
        f"{took:.1f} s ({took / max(1, n) * 1e6:.1f} µs/request); one hour ({one:,} requests, "
        f"the writer's steady state) {hour * 1000:.0f} ms"
    )


def timed_read(path: Path, since: float, now: float, by: tuple[str, ...], use_packs: bool) -> Any:
    t = time.perf_counter()
    con = connect(path, create=False)
    w = read_window(con, since, now, use_packs=use_packs)
    u = summarize(w, texts_of(con), by)  # type: ignore[arg-type]
    con.close()
    return time.perf_counter() - t, w, u


def timed_command(path: Path, since: str, by: str) -> float:
    cmd = [sys.executable, "-m", "tui", "usage", "--ledger", str(path), "--since", since]
    t = time.perf_counter()
    r = subprocess.run([*cmd, "--by", by, "--json"], cwd=ROOT, capture_output=True, timeout=300)
    took = time.perf_counter() - t
    assert r.returncode == 0, r.stderr[-2000:]
    return took


def same(a: Any, b: Any) -> None:
    """The numbers read from packs are those read from the rows."""
    ga = {g.key: g for g in a.groups}
    gb = {g.key: g for g in b.groups}
    assert ga.keys() == gb.keys()
    for k, x in ga.items():
        y = gb[k]
        assert (x.requests, x.failed, x.prompt_tokens, x.output_tokens) == (
            y.requests, y.failed, y.prompt_tokens, y.output_tokens,
        ), k  # fmt: skip
        assert x.quantiles == y.quantiles, k
        assert abs(x.busy_s - y.busy_s) <= 1e-9 * max(1.0, abs(y.busy_s)), k


def windows(path: Path, days: float, now: float, repeat: int) -> int:
    """Prints each window's times; returns how many windows were read (each one checked:
    every request in it read, the packs' sums the rows')."""
    n = 0
    con = connect(path, create=False)
    print("query plans: " + " · ".join(query_plan(con)))
    con.close()
    for label, span, by in (
        ("--since 24h --by client,model", 1.0, ("client", "model")),
        ("--since 7d --by client", 7.0, ("client",)),
        ("--since 7d --by model,day", 7.0, ("model", "day")),
        ("--since 30d --by client", 30.0, ("client",)),
        ("--since 90d --by client", 90.0, ("client",)),
    ):
        if span > days * 1.5 and span != 7.0:
            continue
        since = now - span * 86_400
        con = connect(path, create=False)
        counted = con.execute("SELECT COUNT(*) FROM requests WHERE t0 >= ?", (since,)).fetchone()[0]
        con.close()
        read: list[float] = []
        whole: list[float] = []
        for _ in range(repeat):
            took, w, u = timed_read(path, since, now, by, True)
            read.append(took)
            whole.append(timed_command(path, f"{span:g}d", ",".join(by)))
        assert len(w.cols) == u.total.requests == counted, (len(w.cols), counted)  # the workload
        rows_took, _w, from_rows = timed_read(path, since, now, by, False)
        same(u, from_rows)
        p50, c50 = percentile(read, 50), percentile(whole, 50)
        print(
            f"usage {label}: {counted:,} requests ({w.packed_requests:,} from "
            f"{w.packed_hours:,} hour packs, {w.row_requests:,} from rows); read+summed p50 "
            f"{p50 * 1000:.0f} ms [{', '.join(f'{t * 1000:.0f}' for t in read)}]; the whole "
            f"command p50 {c50 * 1000:.0f} ms [{', '.join(f'{t * 1000:.0f}' for t in whole)}]"
            f"{'  (< 1 s)' if c50 < 1 else '  (over 1 s)'}; every hour from the rows "
            f"{rows_took * 1000:.0f} ms: {rows_took / p50:.1f}× the packs' read"
        )
        n += 1
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--days", type=float, default=90.0)
    ap.add_argument("--clients", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write-rows", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--verdicts", type=float, default=0.0, help="share of rows with a verdict")
    ap.add_argument("--keep", type=Path, help="fill this file (kept; reused if it exists)")
    smoke.add_flag(ap)
    args = ap.parse_args()
    if args.smoke:  # a ledger of 5,000 requests, each window read once
        args.rows, args.clients, args.repeat, args.write_rows, args.keep = 5000, 50, 1, 2000, None
    work = Path(tempfile.mkdtemp(prefix="ledger-usage-"))
    path = args.keep or work / "ledger.sqlite3"
    load = os.getloadavg()
    print(
        f"ledger_usage.py: {args.rows:,} requests over {args.days:g} days, {args.clients} "
        f"clients, {args.verdicts:.0%} with a verdict; {os.cpu_count()} cores, "
        f"load {load[0]:.2f} {load[1]:.2f}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    now = time.time()
    write_cost(work, args.write_rows, now)
    if not path.exists():
        filled = fill(path, args.rows, args.days, args.clients, args.seed, now, args.verdicts)
        print(
            f"filled in {filled:.1f} s ({args.rows / filled:,.0f} requests/s through write_batch)"
        )
        packing(path, now)
    con = connect(path, create=False)
    stored = int(con.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    pack_bytes, packed = con.execute(
        "SELECT SUM(length(data)), SUM(requests) FROM packs"
    ).fetchone()
    hours = int(con.execute("SELECT COUNT(*) FROM hours").fetchone()[0])
    n_packs = int(con.execute("SELECT COUNT(*) FROM packs").fetchone()[0])
    texts = int(con.execute("SELECT COUNT(*) FROM texts").fetchone()[0])
    con.close()
    assert stored == args.rows or args.keep, (stored, args.rows)
    assert n_packs >= hours - 2, (n_packs, hours)  # all but the last, not due yet
    size = path.stat().st_size
    print(
        f"stored: {stored:,} requests, {texts:,} names; file {size / 2**20:.1f} MiB: "
        f"{size / max(1, stored):.0f} bytes per request, of which the packs "
        f"{pack_bytes / max(1, packed):.1f} ({n_packs:,} packs of {hours:,} hours)"
    )
    read = windows(path, args.days, now, args.repeat)
    load = os.getloadavg()
    print(f"load at the end {load[0]:.2f} {load[1]:.2f}")
    if args.smoke:  # (the asserts above: every row stored and packed, each window whole)
        smoke.check(read == 5, f"{read} of 5 windows read")
        smoke.passed(f"{stored:,} requests written and packed, 5 windows read and checked")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
