"""``infertop usage`` over a ledger that ``run`` and ``bench`` wrote (subprocesses, a
synthetic engine): JSON, CSV and the table agree; --no-ledger records nothing; a hostile
client name is harmless in each output; --fingerprint makes a key's fingerprint."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from collections import Counter
from pathlib import Path

from tests.ledger.ledger_support import outcome, writing_as_version_3
from tui.core.outcome import ClientIdentity
from tui.ledger.writer import LedgerSink

CONFIG = (
    'default_engine = "s"\n[generation]\nmax_tokens = 6\n'
    '[engines.s]\nkind = "synthetic"\noptions = { tokens_per_s = 2000, ttft_ms = 2 }\n'
)


def _cli(cmd: list[str], env: dict[str, str], args: list[str], **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=120, **kw)


def test_run_and_bench_are_recorded_and_usage_adds_them_up(infertop_cmd, cli_env, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    ledger = tmp_path / "l.sqlite3"
    base = ["--config", str(cfg)]
    r = _cli(infertop_cmd, cli_env, [*base, "run", "--prompt", "hi", "--ledger", str(ledger),
                                      "--json"])  # fmt: skip
    assert r.returncode == 0, r.stderr
    run_verdict = json.loads(r.stdout)["verdict"]["kind"]
    r = _cli(infertop_cmd, cli_env, [*base, "run", "--prompt", "hi", "--no-ledger"])
    assert r.returncode == 0, r.stderr
    out = tmp_path / "bench"
    r = _cli(
        infertop_cmd,
        cli_env,
        [*base, "bench", "--runs", "2", "--warmup", "1", "--max-tokens", "6", "--out", str(out),
         "--energy", "off", "--ledger", str(ledger)],
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads((out / "report.json").read_text())
    sent = sum(len(e["records"]) for e in report["engines"])  # calibration, warm-up too
    r = _cli(
        infertop_cmd, cli_env, [*base, "usage", "--ledger", str(ledger), "--by", "source", "--json"]
    )
    assert r.returncode == 0, r.stderr
    got = {g["source"]: g for g in json.loads(r.stdout)["groups"]}
    assert (
        got["run"]["requests"] == 1 and got["run"]["output_tokens"] == 6
    )  # not the --no-ledger one
    assert got["bench"]["requests"] == sent >= 4
    records = [r for e in report["engines"] for r in e["records"]]
    assert got["bench"]["output_tokens"] == sum(r["metrics"]["output_tokens"] for r in records)
    # by verdict: each request under the verdict its report (bench) or --json (run) gave
    r = _cli(
        infertop_cmd, cli_env, [*base, "usage", "--ledger", str(ledger), "--by", "source,verdict",
                                "--json"],
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    groups = json.loads(r.stdout)["groups"]
    got = {(g["source"], g["verdict"]): g["requests"] for g in groups}
    want = Counter(("bench", rec["verdict"]["kind"]) for rec in records)
    assert got == {**want, ("run", run_verdict): 1}


def test_outputs_agree_and_hostile_names_are_harmless(infertop_cmd, cli_env, tmp_path):
    ledger = tmp_path / "l.sqlite3"
    sink = LedgerSink(ledger)
    evil = "=cmd|' /C calc'!A0\x1b[2J\x07"
    for who in ("alice", "alice", evil):
        sink.publish(outcome(ClientIdentity(user=who), prompt=5, output=7))
    sink.flush()
    sink.close()
    args = ["usage", "--ledger", str(ledger), "--since", "1d"]
    j = json.loads(_cli(infertop_cmd, cli_env, [*args, "--json"]).stdout)
    assert {g["client"]: g["requests"] for g in j["groups"]} == {"alice": 2, evil: 1}
    assert j["total"]["prompt_tokens"] == 15 and "attribution" in j["attribution"]
    rows = list(csv.DictReader(io.StringIO(_cli(infertop_cmd, cli_env, [*args, "--csv"]).stdout)))
    assert {r["client"] for r in rows} == {"alice", "'" + evil}  # no formula for a spreadsheet
    table = _cli(infertop_cmd, cli_env, args)
    assert table.returncode == 0 and "\x1b" not in table.stdout and "\x07" not in table.stdout
    assert "alice" in table.stdout and "total" in table.stdout and "attribution" in table.stdout
    plan = json.loads(_cli(infertop_cmd, cli_env, [*args, "--json", "--explain"]).stdout)
    assert plan["read"] == {"requests": 3, "packed_hours": 0, "packed_requests": 0,
                            "row_requests": 3}  # fmt: skip
    packs, rows = plan["query_plan"]  # an index search each, never a scan of the table
    assert "SEARCH packs USING INTEGER PRIMARY KEY" in packs, packs
    assert "SEARCH requests USING INDEX requests_t0" in rows and "SCAN" not in rows, rows
    bad = _cli(infertop_cmd, cli_env, ["usage", "--ledger", str(tmp_path / "none.db")])
    assert bad.returncode == 1 and "no ledger here yet" in bad.stderr


def test_fingerprint_of_a_key_from_stdin(infertop_cmd, cli_env):
    one = _cli(infertop_cmd, cli_env, ["usage", "--fingerprint"], input="sk-secret\n")
    two = _cli(infertop_cmd, cli_env, ["usage", "--fingerprint"], input="sk-secret")
    other = _cli(infertop_cmd, cli_env, ["usage", "--fingerprint"], input="sk-other")
    assert one.returncode == 0, one.stderr
    fp = one.stdout.strip()
    assert fp.startswith("k:") and len(fp) == 14 and fp == two.stdout.strip()
    assert other.stdout.strip() != fp and "sk-" not in one.stdout
    secret = Path(cli_env["XDG_DATA_HOME"]) / "infertop" / "client-secret"
    assert secret.stat().st_mode & 0o777 == 0o600


def test_usage_packs_an_upgraded_ledger_and_answers_the_same(infertop_cmd, cli_env, tmp_path):
    """A schema-2 file (no packs): ``usage`` upgrades it, packs the past hours, and the
    numbers are those of the rows."""
    import random
    import sqlite3
    import time

    from tests.ledger.reference import reference
    from tui.ledger.store import MIGRATIONS, statements
    from tui.ledger.writer import write_batch

    path = tmp_path / "v2.sqlite3"
    raw = sqlite3.connect(str(path), isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    for step in MIGRATIONS[:2]:
        for statement in statements(step):
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 2")
    rng = random.Random(2)
    now = time.time()
    items = [
        outcome(rng.choice("xyz"), t0=now - rng.uniform(3600, 30 * 3600),
                e2e_s=rng.uniform(0.1, 900), output=rng.randint(0, 99))
        for _ in range(400)
    ]  # fmt: skip
    with writing_as_version_3():
        write_batch(raw, items)  # type: ignore[arg-type]
    raw.close()
    path.chmod(0o600)
    r = _cli(infertop_cmd, cli_env, ["usage", "--ledger", str(path), "--since", "2d", "--json"])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["read"]["packed_hours"] >= 25 and j["read"]["row_requests"] < 40
    con = sqlite3.connect(str(path))
    want = reference(con, j["since"], j["until"])
    got = {g["client"]: g for g in j["groups"]}
    assert set(got) == set(want)
    for k, w in want.items():
        assert (got[k]["requests"], got[k]["output_tokens"]) == (w["requests"], w["output_tokens"])
        assert abs(got[k]["busy_s"] - w["busy_s"]) < 1e-6
