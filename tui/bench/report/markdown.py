"""report.md: tables shaped like the blog posts, from the report (tui/bench/report/shape.py),
one function per section."""

from __future__ import annotations

from typing import Any

from tui.bench.report.batching import batching_markdown
from tui.bench.report.depth import depth_markdown
from tui.bench.report.energy import energy_markdown, jpt_cell
from tui.bench.report.format import DASH, METRIC_WORDS, ci, num, pcts, table
from tui.bench.report.level_truth import truth_markdown
from tui.bench.report.pareto import pareto_markdown
from tui.bench.report.reasoning import DEFINITIONS as REASONING_DEFINITIONS
from tui.bench.report.reasoning import reasoning_markdown, run_reasoned
from tui.bench.report.shape import BenchReport, EngineSummary, LevelSummary
from tui.bench.report.slo import arrivals_markdown, capacity_markdown, slo_markdown
from tui.bench.report.sweep import sweep_markdown
from tui.bench.report.why import why_markdown
from tui.bench.report.workload import workload_markdown


def _level(engine: EngineSummary, label: str | None) -> LevelSummary | None:
    return next((lv for lv in engine["levels"] if lv["label"] == label), None)


def _environment(env: dict[str, Any]) -> str:
    gib = env.get("memory_total_bytes")
    mem = f"{gib / 2**30:.1f} GiB RAM" if gib else "RAM unknown"
    gpus = env.get("gpus") or []
    gpu = ", ".join(g["name"] for g in gpus) if gpus else "no GPU"
    vers = ", ".join(f"{k} {v}" for k, v in (env.get("versions") or {}).items())
    line = f"{env.get('cpu', '?')} ({env.get('cpu_count', '?')} cores), {mem}, {gpu}; {vers}"
    measuring = env.get("measuring")
    if measuring:
        line += f". Measured with {measuring}"
    sources = env.get("stamp_sources") or {}
    if sources:
        line += ". Stamps: " + "; ".join(
            f"{name}: {', '.join(ways) or 'none recorded'}" for name, ways in sources.items()
        )
    return line


def markdown(report: BenchReport) -> str:
    """report.md: one section after another, each from its own function (the sections of
    other modules: sweep, reasoning, workload, arrivals, SLO, capacity, Pareto, energy, the
    engine's own account, why each request took its time, depth, batching)."""
    reasoned = run_reasoned(report)  # TTFO columns only where some request reasoned
    lines = _title(report) + _setup(report) + _engines(report, reasoned)
    lines += sweep_markdown(report) + _cold(report) + _scaling(report, reasoned)
    lines += reasoning_markdown(report)
    lines += workload_markdown(report) + arrivals_markdown(report) + slo_markdown(report)
    lines += capacity_markdown(report) + pareto_markdown(report)
    lines += energy_markdown(report)
    lines += truth_markdown(report, table)
    lines += why_markdown(report)
    lines += _comparisons(report)
    lines += depth_markdown(report) + batching_markdown(report)
    lines += _fairness(report) + _failures(report) + _definitions(report, reasoned)
    return "\n".join(lines)


def _title(report: BenchReport) -> list[str]:
    lines = ["# infertop bench report", ""]
    if report.get("partial"):
        lines += [
            f"> **PARTIAL REPORT** ({report.get('partial_reason')}): the bench was "
            "stopped; only what was measured is shown.",
            "",
        ]
    return lines + [
        f"Started {report['started_at']}, finished {report.get('finished_at') or DASH}.",
        "",
    ]


def _setup(report: BenchReport) -> list[str]:
    plan = report["plan"]
    lines = ["## Setup", ""]
    lines += table(
        ["runs", "warm-up", "concurrency", "rate", "prompt tokens", "max tokens"]
        + ["temperature", "cold", "preset", "SLO"],
        [
            [
                str(plan["runs"]),
                str(plan["warmup"]),
                ",".join(map(str, plan["concurrency"])),
                num(plan["rate"], 2) if plan["rate"] else DASH,
                str(plan["prompt_tokens"]),
                str(plan["max_tokens"]),
                num(plan["temperature"], 2),
                f"yes ({plan['cold_runs']} per engine)" if plan["cold"] else "no",
                plan["preset"] or DASH,
                ", ".join(f"{k}≤{v:g}" for k, v in plan["slo"].items()) or DASH,
            ]
        ],
    )
    lines += ["Environment: " + _environment(report.get("environment") or {}), ""]
    workers = plan.get("workers") or 1
    return lines + [
        f"Client: {workers} process{'es' if workers > 1 else ''} per concurrency level of an "
        "HTTP engine (--workers; records merged on one monotonic clock)",
        "",
    ]


def _engines(report: BenchReport, reasoned: bool) -> list[str]:
    engines = report["summary"]["engines"]
    models = {e["name"]: (e.get("info") or {}).get("model", DASH) for e in report["engines"]}
    rows = []
    for e in engines:
        lv = _level(e, e["headline"])
        med = lv["medians"] if lv else {}
        rows.append(
            [
                e["name"],
                e["kind"],
                str(models.get(e["name"], DASH)),
                lv["label"] if lv else DASH,
                ci(med.get("decode_tps")),
                ci(med.get("prefill_tps")),
                ci(med.get("ttft_ms")),
                *([ci(med.get("ttfo_ms"))] if reasoned else []),
                ci(med.get("itl_ms"), 2),
                ci(med.get("tpot_ms"), 2),
                num(e["load_ms"]),
                jpt_cell(lv),
                f"{e['ok']} / {e['failed']}"
                + (f" / {e['cancelled']} cancelled" if e["cancelled"] else ""),
            ]
        )
    lines = ["## Engines (warm; median [95% CI])", ""]
    lines += table(
        ["engine", "kind", "model", "level", "decode tok/s", "prompt tok/s", "TTFT ms"]
        + (["TTFO ms"] if reasoned else [])
        + ["ITL ms", "TPOT ms", "load ms", "J/token", "ok / failed"],
        rows,
    )
    lines += [f"- **{e['name']} did not run**: {e['error']}" for e in engines if e["error"]]
    return lines + ([""] if any(e["error"] for e in engines) else [])


def _cold(report: BenchReport) -> list[str]:
    if not report["plan"]["cold"]:
        return []
    rows = []
    for e in report["summary"]["engines"]:
        cold = e.get("cold")
        if not e["cold_method"] or cold is None or not cold["ok"]:
            rows.append([e["name"], e["cold_note"] or "cold start not measured", *[DASH] * 5])
            continue
        warm = _level(e, e["headline"])
        wm = warm["medians"] if warm else {}
        rows.append(
            [
                e["name"],
                e["cold_method"],
                ci(cold.get("load_ms")),
                ci(cold["medians"].get("ttft_ms")),
                ci(wm.get("ttft_ms")),
                ci(cold["medians"].get("decode_tps")),
                ci(wm.get("decode_tps")),
            ]
        )
    return ["## Cold vs warm", ""] + table(
        ["engine", "how cold is forced", "time to ready ms", "cold TTFT ms", "warm TTFT ms"]
        + ["cold decode tok/s", "warm decode tok/s"],
        rows,
    )


def _scaling(report: BenchReport, reasoned: bool) -> list[str]:
    """One "Scaling" table per engine that measured a level."""
    lines: list[str] = []
    for e in report["summary"]["engines"]:
        if not e["levels"]:
            continue
        lines += [f"## Scaling: {e['name']}", ""]
        if e["single_request_tps"] is None and any(lv["concurrency"] for lv in e["levels"]):
            lines += ["η needs a c=1 level (the single-request rate); none was measured.", ""]
        lines += table(
            ["level", "ok / failed", "total tok/s", "per-request tok/s", "η", "η/c"]
            + ["TTFT ms p50/90/95/99"]
            + (["TTFO ms p50/90/95/99"] if reasoned else [])
            + ["ITL ms p50/90/95/99", "TPOT ms p50/90/95/99", "e2e ms p50/90/95/99"]
            + ["goodput"],
            [_scaling_row(lv, reasoned) for lv in e["levels"]],
        )
    return lines


def _scaling_row(lv: LevelSummary, reasoned: bool) -> list[str]:
    p = lv["percentiles"]
    g = lv.get("goodput")
    return [
        lv["label"] + ("" if lv["complete"] else " (stopped)"),
        f"{lv['ok']} / {lv['failed']}",
        num(lv["total_tps"]),
        ci(lv["medians"].get("decode_tps")),
        num(lv["eta"], 2),
        num(lv["eta_per_slot"], 2),
        pcts(p["ttft_ms"]),
        *([pcts(p.get("ttfo_ms") or {})] if reasoned else []),
        pcts(p["itl_ms"], 2),
        pcts(p["tpot_ms"], 2),
        pcts(p["e2e_ms"], 0),
        f"{num(g['requests_per_s'], 2)} req/s ({g['good']}/{lv['requests']})" if g else DASH,
    ]


def _comparisons(report: BenchReport) -> list[str]:
    comparisons = report["summary"]["comparisons"]
    if not comparisons:
        return []
    lines = ["## Comparisons (ratio of medians [95% CI])", ""]
    for c in comparisons:
        lines.append(
            f"- {c['engine']} {METRIC_WORDS.get(c['metric'], c['metric'])} is "
            f"{c['ratio']:.2f}× {c['baseline']} [{c['low']:.2f}, {c['high']:.2f}] "
            f"({c['level']}, n={c['n'][0]}/{c['n'][1]})"
        )
    return lines + [""]


def _fairness(report: BenchReport) -> list[str]:
    lines = ["## Fairness checks", ""]
    for e in report["summary"]["engines"]:
        cap = e["capacity"]
        lines.append(
            f"- {e['name']}: parallel capacity "
            f"{cap if cap is not None else 'unknown'} ({e['capacity_note']})"
        )
        pr = e.get("prompt")
        if pr:
            lines.append(
                f"- {e['name']}: prompt {num(pr['counted_tokens'])} tokens "
                f"(target {pr['target_tokens']}, by {pr['method']})"
            )
        lines += [f"- ⚠ {w}" for w in e["warnings"]]
    lines += [f"- {n}" for n in report["summary"]["fairness"]]
    return lines + [""]


def _failures(report: BenchReport) -> list[str]:
    failures = [(e["name"], f) for e in report["summary"]["engines"] for f in e["failures"]]
    if not failures:
        return []
    return ["## Failed requests", ""] + table(
        ["engine", "level", "#", "kind", "message"],
        [
            [n, f["level"], str(f["index"]), str(f["kind"]), str(f["message"]).replace("|", "\\|")]
            for n, f in failures
        ],
    )


def _definitions(report: BenchReport, reasoned: bool) -> list[str]:
    return [
        "## Definitions",
        "",
        "TTFT: request sent → first chunk with generated text. ITL: gaps between content "
        "chunks, per token. TPOT: (e2e − TTFT) / (output tokens − 1). Decode tok/s: "
        "(output tokens − 1) / (last − first content chunk). Total tok/s: output tokens of a "
        "level / its wall time. η = total tok/s ÷ the c=1 total tok/s (ideal: η = c). "
        + (REASONING_DEFINITIONS + " " if reasoned else "")
        + "Intervals: percentile bootstrap of the median over requests "
        f"({report['summary'].get('bootstrap_resamples', '?')} resamples).",
        "",
    ]
