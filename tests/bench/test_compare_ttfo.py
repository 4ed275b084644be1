"""``infertop compare`` and TTFO: a ratio where both reports carry it and a model thought,
none (and a note) against a report from before TTFO, none where TTFO = TTFT; a report
whose TTFO is not a number is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.synthetic import level, reasoning_record, record, result
from tui.bench.compare.markdown import markdown
from tui.bench.compare.ratios import (
    METRICS,
    TTFO_METRIC,
    RequestSample,
    compare_reports,
    level_samples,
    statistic,
)
from tui.bench.report.files import build_report, load_report

FROZEN = Path(__file__).resolve().parents[1] / "app" / "compare_reports"  # pre-TTFO reports


def thinking_report(think: int) -> dict:
    """c=1, 6 requests: TTFT 100 + 10·i ms, then ``think`` reasoning tokens 10 ms apart
    (TTFO = TTFT + 10·think), then 6 answer tokens."""
    recs = [reasoning_record(i * 500, 100 + 10 * i, think, 6, 10, index=i) for i in range(6)]
    return build_report(result([level(recs, 1)]), n_boot=50)


def plain_report() -> dict:
    recs = [record(i * 500, 100 + 10 * i, 6, 10, index=i) for i in range(6)]
    return build_report(result([level(recs, 1)]), n_boot=50)


def rows(a: dict, b: dict) -> tuple[dict[str, dict], list[str]]:
    comp = compare_reports([(Path("a"), a), (Path("b"), b)], n_boot=300)["comparisons"][0]
    return {r["metric"]: r for r in comp["rows"]}, comp["notes"]


def test_ttfo_is_compared_where_both_carry_it_and_a_model_thought() -> None:
    by, _ = rows(thinking_report(4), thinking_report(14))
    assert set(by) == set(METRICS) | {"ttfo_ms"}
    t = by["ttfo_ms"]
    # medians of 140..190 and 240..290 (TTFT 125 in both: only the thinking differs)
    assert (t["a"], t["b"], t["ratio"]) == pytest.approx((165.0, 265.0, 265 / 165))
    assert t["verdict"] == "worse" and t["low"] > 1.0
    assert by["ttft_ms"]["ratio"] == pytest.approx(1.0)
    md = markdown(
        compare_reports(
            [(Path("a"), thinking_report(4)), (Path("b"), thinking_report(14))], n_boot=300
        )
    )
    assert "| c=1 | TTFO | 165.0 ms | 265.0 ms | 1.606 |" in md
    assert "lower TTFT/TTFO/ITL is better" in md


def test_no_ttfo_row_where_neither_thought() -> None:
    by, notes = rows(plain_report(), plain_report())
    assert set(by) == set(METRICS)
    assert not any("TTFO" in n for n in notes)
    md = markdown(compare_reports([(Path("a"), plain_report()), (Path("b"), plain_report())]))
    assert "TTFO" not in md


def test_a_report_from_before_ttfo_still_compares_and_says_what_it_lacks() -> None:
    old = load_report(FROZEN / "a")  # written before TTFO: no ttfo_ms in its records
    assert "ttfo_ms" not in old["engines"][0]["records"][0]["metrics"]
    new = thinking_report(4)
    by, notes = rows(old, new)
    assert set(by) == set(METRICS)  # the five, each with its two values
    assert all(r["a"] is not None and r["b"] is not None for r in by.values())
    assert any("TTFO not compared: B reasoned, A's report predates TTFO" in n for n in notes)
    _by, notes = rows(new, old)
    assert any("TTFO not compared: A reasoned, B's report predates TTFO" in n for n in notes)
    # and against a new report without reasoning, nothing to say about TTFO
    _by, notes = rows(old, plain_report())
    assert not any("TTFO" in n for n in notes)


def test_resampled_ttfo_equals_the_statistic_of_each_resample() -> None:
    import numpy as np

    import tui.bench.compare.boot as boot

    lv = level_samples(thinking_report(4))[("e", "c=1")]
    lv.requests[2] = RequestSample(None, 5.0, (), 1, 0.1, None)  # a request without TTFO
    rng = np.random.default_rng(3)
    drawn = []

    class Recording:
        def integers(self, low, high, size):  # type: ignore[no-untyped-def]
            idx = rng.integers(low, high, size=size)
            drawn.append(idx)
            return idx

    got = boot.resampled_statistics(lv, 40, Recording())
    stat = statistic("ttfo_ms", lv)
    want = [stat([lv.requests[i] for i in row]) for idx in drawn for row in idx]
    assert list(got["ttfo_ms"]) == pytest.approx(
        [np.nan if w is None else w for w in want], nan_ok=True
    )
    assert "ttfo_ms" in TTFO_METRIC


def test_a_report_whose_ttfo_is_not_a_number_is_refused(tmp_path: Path) -> None:
    report = thinking_report(4)
    report["engines"][0]["records"][3]["metrics"]["ttfo_ms"] = "soon"
    (tmp_path / "report.json").write_text(json.dumps(report))
    with pytest.raises(ValueError, match=r"records\[3\]\.metrics\.ttfo_ms is not a finite number"):
        load_report(tmp_path)
