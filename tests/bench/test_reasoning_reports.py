"""Reasoning in bench reports: TTFO, thinking time and the reasoning/answer split in the
level statistics, report.json, report.csv, report.md and the plots — and a bench without
reasoning written exactly as before (known-answer records: tests/bench/synthetic.py)."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import pytest

from tests.bench.synthetic import level, reasoning_record, record, result
from tui.bench.report.csv import csv_text
from tui.bench.report.files import build_report
from tui.bench.report.markdown import markdown
from tui.bench.report.plots import plots
from tui.bench.stats.aggregate import compare, summarize_level

# the headers report.md had before reasoning was measured
ENGINES_HEAD = (
    "| engine | kind | model | level | decode tok/s | prompt tok/s | TTFT ms | ITL ms | "
    "TPOT ms | load ms | J/token | ok / failed |"
)
SCALING_HEAD = (
    "| level | ok / failed | total tok/s | per-request tok/s | η | η/c | TTFT ms p50/90/95/99 | "
    "ITL ms p50/90/95/99 | TPOT ms p50/90/95/99 | e2e ms p50/90/95/99 | goodput |"
)


def plain_levels():  # type: ignore[no-untyped-def]
    c1 = level([record(i * 500, 100 + 7 * i, 11, 10 + i, index=i) for i in range(5)], 1)
    c2 = level(
        [
            record(i * 300, 120 + 9 * i, 11, 12 + i, level="c=2", concurrency=2, index=10 + i)
            for i in range(6)
        ],
        2,
    )
    return [c1, c2]


def thinking_levels(counted: str = "none"):  # type: ignore[no-untyped-def]
    """c=1: 5 requests, TTFT 100 + 10·i ms, 4 reasoning then 6 answer tokens 10 ms apart, so
    TTFO = TTFT + 40 ms and thinking = 40 ms; c=2 the same with no reasoning."""
    c1 = level(
        [
            reasoning_record(i * 500, 100 + 10 * i, 4, 6, 10, index=i, counted=counted)
            for i in range(5)
        ],
        1,
    )
    c2 = level([record(i * 300, 100, 10, 10, "c=2", 2, 10 + i) for i in range(4)], 2)
    return [c1, c2]


def test_a_level_that_reasoned_has_ttfo_thinking_and_the_token_split() -> None:
    c1, c2 = thinking_levels("none")
    s = summarize_level(c1, None, {}, 10, n_boot=200)
    assert s["medians"]["ttft_ms"]["estimate"] == pytest.approx(120)
    assert s["medians"]["ttfo_ms"]["estimate"] == pytest.approx(160)
    assert s["percentiles"]["ttfo_ms"]["p50"] == pytest.approx(160)
    assert s["percentiles"]["ttfo_ms"]["p90"] == pytest.approx(176)  # 140..180: type 7
    r = s["reasoning"]
    assert (r["requests"], r["ok"], r["answered"]) == (5, 5, 5)
    assert (r["reasoning_tokens"], r["answer_tokens"]) == (20, 30)
    med = r["medians"]
    assert med["thinking_ms"]["estimate"] == pytest.approx(40)
    assert (med["reasoning_tokens"]["estimate"], med["answer_tokens"]["estimate"]) == (4, 6)
    assert med["reasoning_tps"]["estimate"] == pytest.approx(3 / 0.030)  # (R−1) / 30 ms
    assert med["answer_tps"]["estimate"] == pytest.approx(5 / 0.050)
    # no per-chunk counts and none in usage: R is the chunk count, labelled
    assert r["reasoning_tokens_estimated"] and r["answer_tokens_estimated"]
    assert r["reasoning_tokens_sources"] == ["chunk-count-estimate"]
    # the c=2 level did not reason: no reasoning figures, and TTFO is TTFT's
    s2 = summarize_level(c2, None, {}, 10, n_boot=200)
    assert s2["reasoning"] is None
    assert s2["medians"]["ttfo_ms"] == s2["medians"]["ttft_ms"]
    assert s2["percentiles"]["ttfo_ms"] == s2["percentiles"]["ttft_ms"]


@pytest.mark.parametrize(
    ("counted", "source", "estimated"),
    [("usage", "usage", False), ("chunks", "engine-chunks", False), ("none", None, True)],
)
def test_estimates_are_labelled_by_where_the_reasoning_count_came_from(
    counted: str, source: str | None, estimated: bool
) -> None:
    c1, _ = thinking_levels(counted)
    r = summarize_level(c1, None, {}, 10, n_boot=50)["reasoning"]
    assert r["reasoning_tokens"] == 20  # every way counts the 4 tokens of each of 5
    assert r["reasoning_tokens_estimated"] is estimated
    assert r["reasoning_tokens_sources"] == [source or "chunk-count-estimate"]
    md = markdown(build_report(result(thinking_levels(counted)), n_boot=50))
    at = md.index("## Reasoning and answer")
    assert ("(est.)" in md[at : md.index("\n## ", at + 1)]) is estimated
    assert ("reasoning tokens counted from reasoning chunks" in md) is estimated


def test_a_bench_without_reasoning_keeps_todays_tables_and_plots() -> None:
    report = build_report(result(plain_levels(), slo={"ttft_ms": 120.0}), n_boot=200)
    md = markdown(report)
    assert ENGINES_HEAD in md.splitlines() and SCALING_HEAD in md.splitlines()
    for word in ("TTFO", "Reasoning", "reasoning", "thinking", "(est.)"):
        assert word not in md, word
    assert "ttfo.svg" not in plots(report)
    # the JSON still carries TTFO (= TTFT) for whoever reads it
    lv = report["summary"]["engines"][0]["levels"][0]
    assert lv["medians"]["ttfo_ms"] == lv["medians"]["ttft_ms"] and lv["reasoning"] is None
    assert all(
        r["metrics"]["ttfo_ms"] == r["metrics"]["ttft_ms"] for r in report["engines"][0]["records"]
    )


def test_a_bench_that_reasoned_shows_ttfo_and_the_split_in_report_md() -> None:
    report = build_report(result(thinking_levels("none")), n_boot=200)
    md = markdown(report)
    lines = md.splitlines()
    engines = lines.index(next(ln for ln in lines if ln.startswith("| engine | kind |")))
    assert "| TTFT ms | TTFO ms | ITL ms |" in lines[engines]
    row = lines[engines + 2].split(" | ")
    assert row[6].startswith("120.0 [") and row[7].startswith("160.0 [")  # TTFT, TTFO
    assert any("| TTFT ms p50/90/95/99 | TTFO ms p50/90/95/99 |" in ln for ln in lines)
    assert "| c=1 | 5 / 0 |" in md and "160.0 / 176.0 / 178.0 / 179.6" in md
    # the section: only the level that reasoned, every figure of the summary
    at = lines.index("## Reasoning and answer (median [95% CI])")
    end = lines.index("", at + 2)  # the table ends at the first blank line
    head, rows = lines[at + 2], lines[at + 4 : end]
    assert "reasoned / ok | TTFO ms | thinking ms | reasoning tokens" in head
    assert len(rows) == 1
    cells = rows[0].strip("| ").split(" | ")
    assert cells[:3] == ["e", "c=1", "5 / 5"]
    assert cells[4].startswith("40.0") and cells[5].endswith("(est.)")
    assert cells[7] == "20 / 30 (est.)"
    assert "TTFO: request sent → first answer token or tool call" in md  # definitions
    svg = plots(report)["ttfo.svg"]
    assert ET.fromstring(svg).findall("{http://www.w3.org/2000/svg}polyline")


def test_a_request_that_never_answered_has_no_ttfo_and_is_said_so() -> None:
    recs = [reasoning_record(0, 100, 5, 5, 10, index=0), reasoning_record(500, 100, 6, 0, 10)]
    recs[1].index, recs[1].request_id = 1, "r1"
    report = build_report(result([level(recs, 1)]), n_boot=50)
    r = report["summary"]["engines"][0]["levels"][0]["reasoning"]
    assert (r["requests"], r["answered"]) == (2, 1)
    assert report["engines"][0]["records"][1]["metrics"]["ttfo_ms"] is None
    assert "1 of 2 requests ended without an answer after their reasoning" in markdown(report)


def test_csv_and_json_carry_every_new_field_of_each_request() -> None:
    report = build_report(result(thinking_levels("usage")), n_boot=50)
    rows = list(csv.DictReader(io.StringIO(csv_text(report))))
    records = report["engines"][0]["records"]
    assert len(rows) == len(records) == 9
    new = ("ttfo_ms", "thinking_ms", "reasoning_tokens", "answer_tokens")
    new += ("reasoning_tps", "answer_tps")
    for row, rec in zip(rows, records):
        m = rec["metrics"]
        for col in new:
            assert (row[col] == "") is (m[col] is None), col
            if m[col] is not None:
                assert float(row[col]) == pytest.approx(m[col]), col
        assert row["reasoning_tokens_source"] == (m["reasoning_tokens_source"] or "")
        assert row["answer_tokens_estimated"] == str(m["answer_tokens_estimated"])
    first = rows[0]
    assert (first["ttfo_ms"], first["thinking_ms"]) == ("140.0", "40.0")
    assert (first["reasoning_tokens"], first["answer_tokens"]) == ("4", "6")
    assert first["reasoning_tokens_source"] == "usage"


def test_in_report_comparisons_add_ttfo_only_where_an_engine_reasoned() -> None:
    res = result(thinking_levels("usage"))
    other = result(thinking_levels("usage")).engines[0]
    other.name = "f"
    for lv in other.levels:  # f answers 20 ms later than e: its TTFO ratio is known
        for r in lv.records:
            r.metrics.ttfo_ms = (r.metrics.ttfo_ms or 0) + 20
    res.engines.append(other)
    ttfo = [c for c in compare(res, n_boot=100) if c["metric"] == "ttfo_ms"]
    assert len(ttfo) == 1 and ttfo[0]["ratio"] == pytest.approx(180 / 160)
    assert "f TTFO is 1.12× e" in markdown(build_report(res, n_boot=100))
    plain = result(plain_levels())
    plain.engines.append(result(plain_levels()).engines[0])
    plain.engines[1].name = "f"
    assert not [c for c in compare(plain, n_boot=50) if c["metric"] == "ttfo_ms"]


def test_the_progress_line_shows_ttfo_beside_ttft_only_when_they_differ() -> None:
    from tui.bench.run.results import BenchUpdate
    from tui.cli.bench_progress import _last

    def last(rec) -> str:  # type: ignore[no-untyped-def]
        return _last(BenchUpdate(1, 2, "e", "c=1", 1.0, 1.0, rec))

    assert last(record(0, 100, 11, 10)) == "last: TTFT 100 ms, 100.0 tok/s"
    thought = reasoning_record(0, 100, 4, 7, 10, counted="usage")
    assert last(thought) == "last: TTFT 100 ms, TTFO 140 ms, 100.0 tok/s"
    silent = reasoning_record(0, 100, 5, 0, 10, counted="usage")
    assert last(silent) == "last: TTFT 100 ms, TTFO no answer, 100.0 tok/s"
