"""Rows 8 and 10: files from others never crash infertop; files it writes stay private.

Session logs (``infertop replay``) and bench reports (``infertop compare``) may come from
someone else: a line ``[`` x 100,000, a number of 5,000 digits, a token count that is a
string, a NaN time. Each bad line is skipped (or the file refused) with a message naming
the file and line, never a traceback, and a bad record never makes a replayed turn
vanish. Bench reports hold every prompt and answer: 0600 in a 0700 folder, and a CSV
cell a spreadsheet would run as a formula is written as text.
"""

from __future__ import annotations

import csv
import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support import hostile_server as hs
from tui.app.widgets.conversation import Conversation
from tui.cli.replay import ReplayError, build_replay_app
from tui.core.session import read_session

REPORTS = Path(__file__).resolve().parents[1] / "app" / "compare_reports"
GOOD = {
    "schema": 1,
    "engine": "e",
    "model": "m",
    "prompt": "hello",
    "timeline": {
        "chunks": [[1_000_000, "Hi", 1], [2_000_000, " there", 1]],
        "t_end_ns": 3_000_000,
        "finish_reason": "stop",
    },
    "text": "Hi there",
}
BAD_LINES = [
    "[" * 100_000,  # RecursionError in json.loads
    "1" * 5000,  # ValueError: past the int digits limit
    json.dumps({**GOOD, "timeline": {"chunks": [[0, "x", "abc"]]}}),
    '{"timeline": {"chunks": [[NaN, "x", 1]]}}',
    json.dumps({**GOOD, "timeline": {**GOOD["timeline"], "t_end_ns": "soon"}}),
    json.dumps({**GOOD, "prompt": 5}),
    json.dumps({**GOOD, "engine_truth": {"decode_ms": 1e400}}).replace("Infinity", "1e999"),
]


def _session(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_read_session_skips_each_bad_line_and_says_why(tmp_path: Path) -> None:
    path = _session(tmp_path, [json.dumps(GOOD), *BAD_LINES, json.dumps(GOOD)])
    got = read_session(path)
    assert len(got.records) == 2
    assert got.bad_lines == list(range(2, 2 + len(BAD_LINES)))
    said = got.describe_bad(path, most=10)
    assert str(path) in said and "line 2: JSON nested too deeply" in said
    assert "line 4: chunk 0's token count is not a whole number" in said
    assert "line 5: chunk 0's time is not a time in ns" in said


def test_replay_refuses_a_file_of_bad_lines_in_one_line(tmp_path, launcher, clean_env) -> None:
    path = _session(tmp_path, BAD_LINES)
    p = subprocess.run(
        [*launcher, "replay", str(path)], env=clean_env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert str(path) in p.stderr and "line 1: JSON nested too deeply" in p.stderr
    nan = subprocess.run(
        [*launcher, "replay", str(path), "--speed", "nan"],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert nan.returncode == 2 and "Traceback" not in nan.stderr, nan.stderr
    with pytest.raises(ReplayError, match="speed"):
        build_replay_app(path, float("inf"))


async def test_replay_plays_every_good_record_and_names_the_bad(tmp_path: Path) -> None:
    evil = {**GOOD, "timeline": {**GOOD["timeline"], "chunks": [[1_000_000, hs.EVIL_TEXT, 2]]}}
    lines = [json.dumps(GOOD), *BAD_LINES, json.dumps(evil)]
    app, bad = build_replay_app(_session(tmp_path, lines), speed=50.0)
    assert bad == list(range(2, 2 + len(BAD_LINES)))
    async with app.run_test(size=(120, 36)) as pilot:
        conv = app.chat.query_one("#conv-A", Conversation)
        for _ in range(400):
            if len(conv.turns) == 2 and conv.turns[1].finished:
                break
            await pilot.pause(0.05)
        assert [t.finished for t in conv.turns] == [True, True]  # none vanished
        assert conv.turns[0].text == "Hi there" and "␛]52" in conv.turns[1].text
        assert any("skipped 7 line(s)" in n.message for n in app._notifications)
        assert not any(ch in app.export_screenshot() for ch in hs.ESCAPES)


def _first_record(report: dict) -> dict:  # type: ignore[type-arg]
    return next(r for e in report["engines"] for r in e.get("records") or [])


def _damaged(report: dict, how: str) -> str:  # type: ignore[type-arg]
    """report.json's text, damaged as a hostile or broken file would be."""
    if how == "deep":
        return "[" * 100_000
    rec = _first_record(report)
    if how == "digits":
        return json.dumps(report).replace('"t_end_s": ', '"t_end_s": 1' + "0" * 5000 + ', "x": ', 1)
    if how == "nan":
        rec["t_end_s"] = float("nan")
    elif how == "string-record":
        report["engines"][0]["records"].insert(0, "abc")
    elif how == "int-engine":
        report["engines"].insert(0, 7)
    elif how == "itl":
        rec["metrics"]["itl_token_ms"] = ["x"]
    elif how == "tokens":
        rec["metrics"]["output_tokens"] = "lots"
    elif how == "weights":  # one gap standing for 2**53 tokens: compare sums the weights
        rec["metrics"].update(itl_token_ms=[1.0, 2.0], itl_token_weights=[1, 2**53])
    return json.dumps(report)


@pytest.mark.parametrize(
    ("how", "needle"),
    [
        ("deep", "nested too deeply"),
        ("digits", "not valid JSON"),
        ("nan", "t_end_s is not a finite number"),
        ("string-record", "engines[0].records[0] is not an object"),
        ("int-engine", "engines[0] is not an object"),
        ("itl", "itl_token_ms holds something not a finite number"),
        ("tokens", "output_tokens is not a whole number"),
        ("weights", "itl_token_weights add up to more than"),
    ],
)
def test_compare_refuses_a_damaged_report_in_one_line(
    tmp_path, launcher, clean_env, how, needle
) -> None:
    report = json.loads((REPORTS / "b" / "report.json").read_text())
    bad = tmp_path / "b" / "report.json"
    bad.parent.mkdir()
    bad.write_text(_damaged(report, how))
    p = subprocess.run(
        [*launcher, "compare", str(REPORTS / "a"), str(bad.parent)],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert len(p.stderr.strip().splitlines()) == 1 and str(bad) in p.stderr
    assert needle in p.stderr, p.stderr


def test_bench_reports_are_private_and_csv_cells_are_not_formulas(
    tmp_path, launcher, clean_env, hostile
) -> None:
    out = tmp_path / "reports" / "run1"
    p = subprocess.run(
        [
            *launcher,
            "bench",
            "--url",
            f"{hostile}/formula",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--max-tokens",
            "4",
            "--out",
            str(out),
        ],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 3, p.stderr  # every request failed: the report is still written
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for f in out.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    rows = list(csv.DictReader((out / "report.csv").open()))
    assert rows and all(r["error"] == "'" + hs.FORMULA for r in rows), rows[0]["error"]
    from tui.bench.report.csv import cell

    assert cell(-3.5) == -3.5 and cell("@SUM(A1)") == "'@SUM(A1)" and cell(None) == ""
    shutil.rmtree(out)
