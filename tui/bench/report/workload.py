"""report.md's workload section: what was asked of the requests and what the engine
counted (tui/bench/stats/workload.py), and the workload options needed to rerun it."""

from __future__ import annotations

from typing import Any

from tui.bench.report.format import DASH, num, table
from tui.bench.report.shape import BenchReport


def _dist(d: dict[str, Any] | None) -> str:
    if not d:
        return DASH
    return f"{num(d['min'], 0)} / {num(d['mean'], 1)} / {num(d['max'], 0)}"


def workload_markdown(report: BenchReport) -> list[str]:
    plan = report["plan"]
    asked = {
        "--input-len": plan.get("input_len"),
        "--output-len": plan.get("output_len"),
        "--dataset": plan.get("dataset"),
        "--shared-prefix": plan.get("shared_prefix") or None,
        "--prefix-cache": "yes" if plan.get("prefix_cache") else None,
        "--turns": plan.get("turns") if (plan.get("turns") or 1) > 1 else None,
    }
    given = {k: v for k, v in asked.items() if v is not None}
    if not given:
        return []
    lines = [
        "## Workload",
        "",
        "Asked: "
        + ", ".join(f"`{k} {v}`" for k, v in given.items())
        + f", seed {plan.get('seed', 0)} (request i draws its lengths from "
        "Random(seed·1000003 + i)).",
        "",
    ]
    rows = []
    for e in report["summary"]["engines"]:
        for lv in e["levels"]:
            w = lv.get("workload")
            if not w:
                continue
            cached = w["cached_tokens"]
            pt = w["prompt_tokens"]
            rows.append(
                [
                    e["name"],
                    lv["label"],
                    _dist(w["input"]["asked"]),
                    " / ".join(num(w["input"][k], 0) for k in ("abs_error_p50", "abs_error_max")),
                    f"{num(pt['min'], 0)} / {num(pt['median'], 0)} / {num(pt['max'], 0)}"
                    if pt
                    else DASH,
                    _dist(w["output"]["asked"]),
                    f"{w['output']['exact']} / {w['output']['n']}",
                    f"{num(cached['min'], 0)} / {num(cached['median'], 0)} / "
                    f"{num(cached['max'], 0)} ({cached['n']})"
                    if cached
                    else "not reported",
                ]
            )
    turns = [
        f"- {e['name']} {lv['label']}: by turn, median prompt tokens (cached): "
        + ", ".join(
            f"{t['turn']}: {num(t['prompt_tokens_median'], 0)} "
            f"({num(t['cached_tokens_median'], 0)})"
            for t in lv["workload"]["by_turn"]
        )
        for e in report["summary"]["engines"]
        for lv in e["levels"]
        if (lv.get("workload") or {}).get("by_turn")
    ]
    return (
        lines
        + table(
            [
                "engine",
                "level",
                "input asked min / mean / max",
                "input |counted − asked| p50 / max",
                "prompt tokens counted min / median / max",
                "output asked min / mean / max",
                "output exact / n",
                "cached prompt tokens min / median / max (n)",
            ],
            rows,
        )
        + (turns + [""] if turns else [])
    )
