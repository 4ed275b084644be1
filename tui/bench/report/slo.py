"""report.md's open-loop sections: arrivals asked vs sent, SLO attainment and goodput per
level (with the definition), and the capacity search's answer and probes."""

from __future__ import annotations

from typing import Any

from tui.bench.report.format import DASH, num, table
from tui.bench.report.shape import BenchReport


def _pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.1f} %"


def _asked(a: dict[str, Any]) -> str:
    s = a["asked"]
    text = f"{s['process']} {s['rate']:g}/s"
    if s["process"] == "gamma":
        text += f" k={s['burstiness']:g}"
    if s.get("ramp_s"):
        text += f", ramp {s['ramp_s']:g} s"
    if s.get("duration_s"):
        text += f", {s['duration_s']:g} s"
    elif s.get("count"):
        text += f", {s['count']} req"
    return text + f", seed {s['seed']}"


def arrivals_markdown(report: BenchReport) -> list[str]:
    rows = []
    for e in report["summary"]["engines"]:
        for lv in e["levels"]:
            a = lv.get("arrivals")
            if not a:
                continue
            sch, sent = a["scheduled"], a["sent"]
            rows.append(
                [
                    e["name"],
                    lv["label"],
                    _asked(a),
                    f"{a['sent_requests']} / {a['planned']}",
                    f"{num(sch['achieved_rate'], 3)} / {num(sent['achieved_rate'], 3)}",
                    " / ".join(num(x, 2) for x in (a["asked"]["asked_cv"], sch["cv"], sent["cv"])),
                    f"{num(a['lag_ms']['p50'], 1)} / {num(a['lag_ms']['p99'], 1)}",
                    num(a["in_flight_max"]),
                    str(lv.get("cut", 0)),
                    lv.get("stop_reason") or DASH,
                ]
            )
    if not rows:
        return []
    return (
        ["## Arrivals: asked, scheduled, sent", ""]
        + table(
            [
                "engine",
                "level",
                "asked",
                "sent / planned",
                "rate/s scheduled / sent",
                "gap CV asked / scheduled / sent",
                "send lag ms p50 / p99",
                "max in flight",
                "cut",
                "stopped early",
            ],
            rows,
        )
        + [
            "Rates are (n − 1) / (last − first arrival); the CV is the inter-arrival gaps' "
            "standard deviation ÷ mean after any ramp; lag = sent − scheduled.",
            "",
        ]
    )


def slo_markdown(report: BenchReport) -> list[str]:
    from tui.bench.stats.slo import slo_definition

    rows = []
    for e in report["summary"]["engines"]:
        for lv in e["levels"]:
            g = lv.get("goodput")
            if not g:
                continue
            per = ", ".join(f"{k} {_pct(v)}" for k, v in g["per_objective"].items())
            rows.append(
                [
                    e["name"],
                    lv["label"],
                    f"{_pct(g['attainment'])} [{_pct(g['attainment_low'])}, "
                    f"{_pct(g['attainment_high'])}]",
                    f"{g['good']} / {g['judged']}",
                    f"{g['failed']} / {g['cut']}",
                    per,
                    num(g["requests_per_s"], 3),
                    num(g["tokens_per_s"]),
                ]
            )
    if not rows:
        return []
    slo = report["plan"]["slo"]
    return (
        ["## SLO attainment and goodput", ""]
        + [f"SLO: {', '.join(f'{k} ≤ {v:g}' for k, v in slo.items())}. {slo_definition(slo)}", ""]
        + table(
            [
                "engine",
                "level",
                "attainment [95% CI]",
                "good / judged",
                "failed / cut",
                "per objective",
                "goodput req/s",
                "goodput tok/s",
            ],
            rows,
        )
    )


def capacity_markdown(report: BenchReport) -> list[str]:
    lines: list[str] = []
    for e in report["summary"]["engines"]:
        cap = e.get("capacity_search")
        if not cap:
            continue
        lo, hi = cap["interval"]
        unit = cap.get("unit", "req/s")
        what = "number of users" if unit == "users" else "rate"
        each = f"each sending ≥ {cap['probe_s']:g} s"
        if cap.get("probe_min_requests"):
            each += f" and ≥ {cap['probe_min_requests']} requests"
        lines += [f"## Capacity: {e['name']}", ""]
        lines += [
            f"Highest {what} with SLO attainment ≥ {_pct(cap['target'])}: "
            f"**{'none found' if lo is None else f'{lo:g} {unit}'}**, interval "
            f"[{DASH if lo is None else f'{lo:g}'}, {DASH if hi is None else f'{hi:g}'}) "
            f"{unit} (the highest that passed, the lowest that failed above it); "
            f"{len(cap['probes'])} probes in {cap['search_s']:.0f} s, {each}. "
            f"Stopped: {cap['done_because']}.",
            "",
        ]
        lines += [f"- {n}" for n in cap["notes"]]
        if cap["notes"]:
            lines.append("")
        rows = [
            [
                str(k),
                f"{p['rate']:g}",
                f"{_pct(p['attainment'])} [{_pct(p['low'])}, {_pct(p['high'])}]",
                f"{p['good']} / {p['judged']}",
                "pass" if p["passed"] else "fail",
                "yes" if p["close"] else "no",
                num(p["wall_s"]),
                p["stop_reason"] or DASH,
            ]
            for k, p in enumerate(cap["probes"], start=1)
        ]
        lines += table(
            [
                "probe",
                "users" if unit == "users" else "rate req/s",
                "attainment [95% CI]",
                "good / judged",
                "verdict",
                "within noise",
                "wall s",
                "stopped early",
            ],
            rows,
        )
    return lines
