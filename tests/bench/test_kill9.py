"""kill -9 of a running `infertop bench`: every report file left is whole.

A real ``python -m tui bench`` on the synthetic engine, checkpointing as often as its
5 % bound allows ($INFERTOP_BENCH_CHECKPOINT_S=0), is SIGKILLed again and again into
the same folder: at random moments, and the instant a report write is seen in progress
(its temp file exists). After each kill, every report file present must parse completely
— the old version or the new one, never a torn one — and the next bench into the folder
removes the temp files the killed writes left.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from tui.bench.report.atomic import STALE_TEMP
from tui.bench.report.files import FILES

KILLS = 8


def start_bench(cli_env: dict[str, str], cfg: Path, out: Path, runs: int) -> subprocess.Popen:
    env = dict(cli_env, INFERTOP_BENCH_CHECKPOINT_S="0")
    args = ["--runs", str(runs), "--warmup", "0", "--concurrency", "1,4", "--max-tokens", "16"]
    return subprocess.Popen(
        [sys.executable, "-m", "tui", "--config", str(cfg), "bench", *args]
        + ["--prompt-tokens", "16", "--out", str(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def temps(out: Path) -> list[str]:
    try:
        return [n for n in os.listdir(out) if STALE_TEMP.match(n)]
    except FileNotFoundError:
        return []


def check_whole(out: Path) -> set[str]:
    """Every report file present parses to its end; returns the names present."""
    present = {p.name for p in out.iterdir()} if out.exists() else set()
    if "report.json" in present:
        data = json.loads((out / "report.json").read_text(encoding="utf-8"))
        assert data["schema"] == "infertop.bench/1" and data["summary"]["engines"]
    if "report.csv" in present:
        rows = list(csv.reader(io.StringIO((out / "report.csv").read_text(encoding="utf-8"))))
        assert len(rows) >= 1 and all(len(r) == len(rows[0]) for r in rows), "ragged CSV"
    if "report.md" in present:
        md = (out / "report.md").read_text(encoding="utf-8")
        assert md.startswith("#") and md.endswith("\n")
    for svg in (n for n in present if n.endswith(".svg")):
        ET.fromstring((out / svg).read_text(encoding="utf-8"))  # whole XML
    return present


def test_sigkill_mid_bench_leaves_every_report_whole(cli_env, tmp_path):
    cfg = tmp_path / "infertop.toml"
    cfg.write_text(
        'default_engine = "s"\n[engines.s]\nkind = "synthetic"\n'
        "options = { tokens_per_s = 2000.0, ttft_ms = 1.0 }\n"
    )
    out = tmp_path / "out"
    rng = random.Random(9)
    interrupted_writes = 0
    reports_seen = 0
    for k in range(KILLS):
        proc = start_bench(cli_env, cfg, out, runs=100_000)
        try:
            if k % 2:  # at a random moment
                time.sleep(rng.uniform(0.5, 2.5))
            else:  # the instant a report write is in progress
                deadline = time.monotonic() + 20
                before = set(temps(out))
                while not set(temps(out)) - before and time.monotonic() < deadline:
                    time.sleep(0.0002)
        finally:
            proc.kill()
            proc.wait(10)
        assert proc.returncode == -9
        left = temps(out)
        interrupted_writes += bool(left)
        present = check_whole(out)
        reports_seen += "report.json" in present
    counts = f"{reports_seen} kills found a report.json, {interrupted_writes} hit a write"
    assert reports_seen >= KILLS // 2, counts  # checkpoints happened before most kills
    assert interrupted_writes >= 1, counts  # at least one kill landed inside a write
    # a bench that runs to its end into the same folder: whole reports, no stale temps
    proc = start_bench(cli_env, cfg, out, runs=2)
    assert proc.wait(60) == 0
    assert FILES[0] in check_whole(out) and temps(out) == []
