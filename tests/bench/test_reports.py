"""Report files parse and agree with each other; writes are atomic; partial is marked."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tui.bench.report.atomic import prepare_out_dir, write_atomic
from tui.bench.report.files import load_report, write_report
from tui.bench.report.format import ci
from tui.bench.run.plan import BenchError, BenchPlan
from tui.bench.run.records import RequestRecord
from tui.bench.run.runner import BenchRunner
from tui.engines.base import EngineSpec


@pytest.fixture
async def report_dir(tmp_path):
    plan = BenchPlan(
        engines=["fast", "slow"],
        runs=3,
        warmup=1,
        concurrency=[1, 2],
        prompt_tokens=30,
        max_tokens=8,
        cold=True,
        slo={"ttft_ms": 25.0},
    )
    specs = [
        EngineSpec("fast", "pace", options={"token_ms": 5.0, "ttft_ms": 10.0}),
        EngineSpec("slow", "pace", options={"token_ms": 10.0, "ttft_ms": 20.0, "slots": 1}),
    ]
    res = await BenchRunner(plan, specs).run()
    write_report(res, tmp_path)
    return tmp_path


def test_all_files_written(report_dir):
    names = {p.name for p in report_dir.iterdir()}
    assert {
        "report.json",
        "report.csv",
        "report.md",
        "ttft.svg",
        "itl.svg",
        "throughput.svg",
    } <= names
    assert not [n for n in names if n.endswith(".tmp")]


def test_csv_rows_are_the_json_records(report_dir):
    report = json.loads((report_dir / "report.json").read_text())
    records = [r for e in report["engines"] for r in e["records"]]
    rows = list(csv.DictReader((report_dir / "report.csv").open()))
    assert len(rows) == len(records) > 0
    for row, rec in zip(rows, records):
        assert row["request_id"] == rec["request_id"]
        assert row["phase"] == rec["phase"] and row["status"] == rec["status"]
        if rec["metrics"]["ttft_ms"] is not None:
            assert float(row["ttft_ms"]) == pytest.approx(rec["metrics"]["ttft_ms"])
        assert int(row["output_tokens"]) == rec["metrics"]["output_tokens"]


def test_json_records_rebuild_to_the_same_metrics(report_dir):
    report = load_report(report_dir)
    for e in report["engines"]:
        for d in e["records"]:
            rec = RequestRecord.from_dict(d)
            assert rec.metrics.ttft_ms == pytest.approx(d["metrics"]["ttft_ms"])
            assert rec.metrics.output_tokens == d["metrics"]["output_tokens"]


def test_markdown_shows_the_json_summary(report_dir):
    report = load_report(report_dir)
    md = (report_dir / "report.md").read_text()
    assert not report["partial"] and "PARTIAL" not in md
    assert report["summary"]["bootstrap_resamples"] == 2000 and "(2000 resamples)" in md
    for e in report["summary"]["engines"]:
        c1 = e["levels"][0]
        assert ci(c1["medians"]["decode_tps"]) in md
        assert ci(c1["medians"]["ttft_ms"]) in md
        assert f"## Scaling: {e['name']}" in md
    comp = report["summary"]["comparisons"][0]
    assert f"{comp['ratio']:.2f}× fast" in md
    assert "exceeds slow's parallel capacity (1)" in md
    assert "## Cold vs warm" in md


def test_svgs_parse_and_plot_each_engine(report_dir):
    for name in ("ttft.svg", "itl.svg", "throughput.svg"):
        root = ET.parse(report_dir / name).getroot()
        lines = root.findall("{http://www.w3.org/2000/svg}polyline")
        assert len(lines) == 2, name
        from tui.bench.report.svg import BOTTOM, LEFT, RIGHT, TOP, H, W

        for line in lines:  # every point inside the axes
            for xy in line.get("points").split():
                x, y = map(float, xy.split(","))
                assert LEFT - 0.01 <= x <= W - RIGHT + 0.01 and TOP - 0.01 <= y <= H - BOTTOM + 0.01
    text = (report_dir / "throughput.svg").read_text()
    assert ">fast<" in text and ">slow<" in text


def test_partial_report_is_marked(tmp_path):
    plan = BenchPlan(engines=["p"], runs=3, warmup=0, prompt_tokens=20, max_tokens=4)
    runner = BenchRunner(plan, [EngineSpec("p", "pace")])
    runner.stop("interrupted (test)")
    import asyncio

    res = asyncio.run(runner.run())
    write_report(res, tmp_path)
    assert load_report(tmp_path)["partial"] is True
    assert "PARTIAL REPORT** (interrupted (test))" in (tmp_path / "report.md").read_text()


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path):
    target = tmp_path / "report.json"
    write_atomic(target, "old")

    class Boom:
        def __str__(self):
            raise RuntimeError

    with pytest.raises(TypeError):
        write_atomic(target, Boom())  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_atomic_write_takes_text_as_utf8_and_bytes_as_they_are(tmp_path):
    target = tmp_path / "report.md"
    write_atomic(target, "α\r\n")  # no newline translation
    assert target.read_bytes() == "α\r\n".encode()
    write_atomic(target, b"\xce\xb1\n")
    assert target.read_bytes() == b"\xce\xb1\n"


def test_temps_left_by_a_killed_bench_are_removed_by_the_next(tmp_path):
    """write_atomic's temp file outlives a process killed mid-write (kill -9); the next
    bench into that folder removes it, and nothing else."""
    import os
    import tempfile

    stale = []
    for name in ("report.json", "report.csv", "report.md", "ttft.svg"):
        fd, path = tempfile.mkstemp(dir=tmp_path, prefix=f".{name}.", suffix=".tmp")
        os.close(fd)  # named exactly as write_atomic names its temp files
        stale.append(Path(path).name)
    keep = [".hidden.tmp", "notes.md", ".report.json.tmp", "report.json"]
    for name in keep:
        (tmp_path / name).write_text("x")
    prepare_out_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keep)


def test_unwritable_out_dir_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(BenchError, match="exists and is not a folder"):
        prepare_out_dir(blocker)
    with pytest.raises(BenchError, match="cannot write there"):
        prepare_out_dir(blocker / "sub")


def test_load_report_rejects_other_files(tmp_path):
    (tmp_path / "report.json").write_text("{}")
    with pytest.raises(ValueError, match="not an infertop bench report"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_report(tmp_path)


def test_ecdf_is_exact_for_short_and_thinned_for_long_samples():
    from tui.bench.report.svg import ECDF_POINTS, ecdf_points

    assert ecdf_points([3.0, 1.0, 2.0]) == [(1.0, 0.0), (1.0, 1 / 3), (2.0, 2 / 3), (3.0, 1.0)]
    long = [float(i) for i in range(10_000)]
    pts = ecdf_points(long)
    assert len(pts) <= ECDF_POINTS + 2
    assert pts[-1] == (9999.0, 1.0) and pts[1] == (0.0, 1 / 10_000)
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(pts, pts[1:]))


@pytest.mark.parametrize("lo, hi", [(0.0, 676.4), (0.0, 1.0), (0.0, 0.37), (3.0, 3.0), (0, 12345)])
def test_axis_ticks_cover_the_data(lo, hi):
    from tui.bench.report.svg import nice_ticks

    ticks = nice_ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= hi
    assert 2 <= len(ticks) <= 12
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1


def test_every_request_has_a_verdict_counted_per_level(report_dir):
    """report.json and report.csv carry each request's verdict; report.md counts them per
    level. The pace engine reports no timings: its requests are decode-shared where
    another decoded beside them, else decode-bound or unknown — never a guessed queue.
    On the one-slot engine the second request waits instead of decoding beside the
    first: a TTFT that is most of it, which nothing the engine said explains: unknown."""
    report = json.loads((report_dir / "report.json").read_text())
    rows = list(csv.DictReader((report_dir / "report.csv").open()))
    assert rows and all(r["verdict"] and r["why"] for r in rows)
    md = (report_dir / "report.md").read_text()
    for e in report["engines"]:
        measured = [r for r in e["records"] if r["phase"] in ("cold", "warm")]
        kinds = {r["verdict"]["kind"] for r in measured}
        assert kinds <= {"decode-shared", "decode-bound", "unknown"}, kinds
        assert f"## Why: {e['name']} (verdicts per level)" in md
        c2 = {r["verdict"]["kind"] for r in measured if r["level"] == "c=2"}
        if e["name"] == "fast":
            assert "decode-shared" in c2, c2
        else:
            assert "decode-shared" not in c2 and "unknown" in c2, c2
