"""``infertop usage`` over a ledger that ``run`` and ``bench`` wrote (subprocesses, a
synthetic engine): JSON, CSV and the table agree; --no-ledger records nothing; a hostile
client name is harmless in each output; --fingerprint makes a key's fingerprint."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

from tests.ledger.ledger_support import outcome
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
    r = _cli(infertop_cmd, cli_env, [*base, "run", "--prompt", "hi", "--ledger", str(ledger)])
    assert r.returncode == 0, r.stderr
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
