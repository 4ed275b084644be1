"""The request ledger at scale: ``infertop usage`` over 1,000,000 stored requests, the
query plan behind it, and the bytes a request costs on disk.

A ledger is filled the way the proxy fills it — outcomes through the real writer
(tui/ledger/writer.py's ``write_batch``, batches of 512 in one transaction each) — with
--rows requests spread evenly over --days days (by default 1,000,000 over the 90 days
the ledger keeps by default: ~11,000 a day), from --clients clients (a Zipf-like mix:
a few busy, many rare), 4 models, 2 upstreams, 3 routes, half of them with an API-key
fingerprint. Then ``usage`` is timed as the command runs it (tui/ledger/usage.py), each
query --repeat times on a fresh connection (the first read of the file included), for
the windows and groupings people ask for, and SQLite's plan is printed (an index
search on ``requests_t0``, never a scan of the table).

The workload is checked: the file holds --rows requests, and the 7-day window's total
equals the rows whose t0 falls in it (counted by SQL apart).

    .venv/bin/python -m benchmarks.ledger_usage                 # 1M rows (~2-4 min to fill)
    .venv/bin/python -m benchmarks.ledger_usage --rows 100000   # a quick run
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from tui.core.metrics import RequestMetrics
from tui.core.outcome import ClientIdentity, RequestOutcome
from tui.core.stats import percentile
from tui.ledger.store import connect
from tui.ledger.usage import query_plan, usage
from tui.ledger.writer import write_batch

MODELS = ("smollm2-135m", "qwen3-8b", "llama-3.1-8b-instruct", "gpt-oss-20b")
UPSTREAMS = ("http://127.0.0.1:8080", "http://10.0.0.7:8000")
ROUTES = (("/v1/chat/completions", "openai-chat"), ("/v1/messages", "anthropic"),
          ("/v1/responses", "openai-responses"))  # fmt: skip
PROGRAMS = ("openai-python", "anthropic-sdk (python)", "Claude Code", "Codex", "curl")


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


def outcome(i: int, t0: float, who: ClientIdentity, rng: random.Random) -> RequestOutcome:
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
    )


def fill(path: Path, rows: int, days: float, n_clients: int, seed: int) -> float:
    rng = random.Random(seed)
    who = clients(n_clients, rng)
    weights = [1 / (k + 1) for k in range(n_clients)]  # Zipf-like: a few busy, many rare
    con = connect(path)
    now = time.time()
    span = days * 86_400
    t_fill = time.perf_counter()
    batch: list[RequestOutcome] = []
    picks = rng.choices(who, weights, k=rows)
    for i in range(rows):
        t0 = now - span + span * i / rows
        batch.append(outcome(i, t0, picks[i], rng))
        if len(batch) == 512:
            write_batch(con, batch)  # type: ignore[arg-type]
            batch = []
    if batch:
        write_batch(con, batch)  # type: ignore[arg-type]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return time.perf_counter() - t_fill


def timed(path: Path, since: float, by: tuple[str, ...], repeat: int) -> tuple[list[float], int]:
    took: list[float] = []
    n = 0
    for _ in range(repeat):
        t = time.perf_counter()
        con = connect(path, create=False)
        u = usage(con, since, by=by)  # type: ignore[arg-type]
        con.close()
        took.append(time.perf_counter() - t)
        n = u.total.requests
    return took, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--days", type=float, default=90.0)
    ap.add_argument("--clients", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="fill this file (kept) instead of a temporary one")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ledger-usage-"))
    path = args.keep or work / "ledger.sqlite3"
    load = os.getloadavg()
    print(
        f"ledger_usage.py: {args.rows:,} requests over {args.days:g} days, {args.clients} "
        f"clients; {os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    if not path.exists():
        filled = fill(path, args.rows, args.days, args.clients, args.seed)
        print(
            f"filled in {filled:.1f} s ({args.rows / filled:,.0f} requests/s through write_batch)"
        )
    con = connect(path, create=False)
    stored = int(con.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    size = path.stat().st_size
    pages = int(con.execute("PRAGMA page_count").fetchone()[0])
    page = int(con.execute("PRAGMA page_size").fetchone()[0])
    texts = int(con.execute("SELECT COUNT(*) FROM texts").fetchone()[0])
    now = time.time()
    in_week = int(
        con.execute("SELECT COUNT(*) FROM requests WHERE t0 >= ?", (now - 7 * 86_400,)).fetchone()[
            0
        ]
    )
    plan = query_plan(con)
    con.close()
    assert stored == args.rows or args.keep, (stored, args.rows)
    print(
        f"stored: {stored:,} requests, {texts:,} names; file {size / 2**20:.1f} MiB "
        f"({pages:,} pages of {page} B): {size / max(1, stored):.0f} bytes per request"
    )
    print("query plan (the window's read): " + "; ".join(plan))
    for label, days, by in (
        ("--since 7d --by client", 7, ("client",)),
        ("--since 7d --by model,day", 7, ("model", "day")),
        ("--since 24h --by client,model", 1, ("client", "model")),
        ("--since 30d --by client", 30, ("client",)),
        ("--since 90d --by client (every row)", 90, ("client",)),
    ):
        took, n = timed(path, now - days * 86_400, by, args.repeat)
        if days == 7:
            assert abs(n - in_week) <= in_week * 0.001 + 5, (n, in_week)  # the workload
        ms = ", ".join(f"{t * 1000:.0f}" for t in took)
        print(
            f"usage {label}: {n:,} requests read; p50 {percentile(took, 50) * 1000:.0f} ms "
            f"[{ms}]{'  (< 1 s)' if percentile(took, 50) < 1 else '  (over 1 s)'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
