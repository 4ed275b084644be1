"""The Markdown of ``infertop compare``: one ratio table per comparison, then warnings."""

from __future__ import annotations

from typing import Any

from tui.bench.report.format import DASH, num, table

HEAD = ["engine", "level", "metric", "A", "B", "B ÷ A", "95 % interval", "change", "n (A, B)"]


def ratio_text(x: float | None) -> str:
    return DASH if x is None else f"{x:.3f}"


def row_cells(row: dict[str, Any]) -> list[str]:
    engine = (
        row["engine_a"]
        if row["engine_a"] == row["engine_b"]
        else (f"{row['engine_a']} → {row['engine_b']}")
    )
    unit = row["unit"]
    interval = (
        DASH if row["low"] is None else f"[{ratio_text(row['low'])}, {ratio_text(row['high'])}]"
    )
    return [
        engine,
        row["level"],
        row["metric_words"],
        f"{num(row['a'])} {unit}" if row["a"] is not None else DASH,
        f"{num(row['b'])} {unit}" if row["b"] is not None else DASH,
        ratio_text(row["ratio"]),
        interval,
        row["verdict"],
        f"{row['n'][0]}, {row['n'][1]}",
    ]


def markdown(result: dict[str, Any]) -> str:
    boot = result["bootstrap"]
    lines = ["# infertop compare", ""]
    for i, rep in enumerate(result["reports"]):
        side = "A" if i == 0 else ("B" if len(result["reports"]) == 2 else f"B{i}")
        engines = ", ".join(f"{e['name']} ({e['kind']}, {e['model']})" for e in rep["engines"])
        partial = " — PARTIAL" if rep["partial"] else ""
        lines.append(f"- **{side}**: `{rep['path']}` ({rep['started_at']}): {engines}{partial}")
    times = "TTFT/ITL"
    if any(r["metric"] == "ttfo_ms" for c in result["comparisons"] for r in c["rows"]):
        times = "TTFT/TTFO/ITL"  # TTFO: first answer token or tool call, thinking included
    lines += [
        "",
        f"Ratios are B ÷ A. Intervals: percentile bootstrap, {boot['level'] * 100:g} %, "
        f"{boot['resamples']} resamples (seed {boot['seed']}), resampling requests on each "
        'side on its own. "no change": the interval holds 1.0; "better"/"worse" follow '
        f"each metric's direction (higher tok/s, lower {times} is better).",
        "",
    ]
    for comp in result["comparisons"]:
        if len(result["comparisons"]) > 1:
            lines += [f"## `{comp['b']}` against `{comp['a']}`", ""]
        warnings = comp["environment_differences"]
        if warnings:
            lines.append(
                "**Warning: the two runs' environments differ** — a ratio may show "
                "the difference in set-up, not in the engine:"
            )
            lines += [f"- {w['text']}" for w in warnings]
            lines.append("")
        else:
            lines += ["Environments match: same machine, versions, model file and settings.", ""]
        if comp["rows"]:
            lines += table(HEAD, [row_cells(r) for r in comp["rows"]])
        else:
            lines += ["No engine and level measured in both reports.", ""]
        lines += [f"- {n}" for n in comp["notes"]]
        if comp["notes"]:
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
