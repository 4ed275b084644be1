"""The Pareto table and plot (tui/bench/report/pareto.py) on a report with known levels."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tui.bench.report.pareto import pareto_markdown, pareto_plot, pareto_points


def lv(label: str, total: float, per_user: float) -> dict:  # type: ignore[type-arg]
    return {"label": label, "total_tps": total, "medians": {"decode_tps": {"estimate": per_user}}}


REPORT = {
    "plan": {"slo": {"tpot_ms": 50.0}},
    "summary": {
        "engines": [
            {
                "name": "a",
                "levels": [lv("c=1", 40.0, 40.0), lv("c=4", 120.0, 30.0), lv("c=8", 110.0, 14.0)],
            },
            {"name": "b", "levels": [lv("c=1", 20.0, 20.0), lv("c=4", 60.0, 15.0)]},
        ]
    },
}


def test_frontier_and_slo_line() -> None:
    pts = pareto_points(REPORT)
    assert [p["frontier"] for p in pts["a"]] == [True, True, False]  # c=8 dominated by c=4
    md = "\n".join(pareto_markdown(REPORT))
    assert "SLO line: per-user 20.0 tok/s" in md
    assert "| a | c=8 | 110.0 | 14.0 | no | below |" in md
    assert "| b | c=1 | 20.0 | 20.0 | yes | above |" in md  # exactly on the line: above


def test_the_plot_is_svg_with_each_engine() -> None:
    svg = pareto_plot(REPORT)
    assert svg is not None
    ET.fromstring(svg)
    assert ">a<" in svg and ">b<" in svg and "SLO" in svg


def test_one_level_per_engine_gives_no_pareto() -> None:
    one = {
        "plan": {"slo": {}},
        "summary": {"engines": [{"name": "a", "levels": [lv("c=1", 1, 1)]}]},
    }
    assert pareto_markdown(one) == [] and pareto_plot(one) is None
