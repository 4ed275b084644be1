"""report.md's "Why" sections: each level's verdicts counted by kind (the rules:
tui/core/verdict.py, docs/engine-inside.md), and speculative decoding's acceptance beside
tok/s per level (tui/bench/stats/why.py)."""

from __future__ import annotations

from collections import Counter

from tui.bench.report.format import DASH, num, table
from tui.bench.report.shape import BenchReport, EngineEntry
from tui.core.spec import pct
from tui.core.verdict import VERDICT_KINDS


def verdict_counts(engine: EngineEntry) -> dict[str, Counter[str]]:
    """Level label → verdict kind → requests (cold and warm requests)."""
    out: dict[str, Counter[str]] = {}
    for rec in engine.get("records", []):
        if rec.get("phase") not in ("cold", "warm"):
            continue
        kind = (rec.get("verdict") or {}).get("kind")
        if isinstance(kind, str):
            out.setdefault(str(rec.get("level")), Counter())[kind] += 1
    return out


def why_markdown(report: BenchReport) -> list[str]:
    lines: list[str] = []
    for e in report.get("engines", []):
        counts = verdict_counts(e)
        if not counts:
            continue
        kinds = [k for k in VERDICT_KINDS if any(c[k] for c in counts.values())]
        lines += [f"## Why: {e['name']} (verdicts per level)", ""]
        rows = [
            [label, *(str(c[k]) if c[k] else DASH for k in kinds)] for label, c in counts.items()
        ]
        lines += table(["level", *kinds], rows)
        lines += [
            "Each request's verdict names its limit by the rules in docs/engine-inside.md "
            "(queued, prefill-bound, cache-hit, decode-shared, …); `unknown` where the "
            "engine gave nothing to decide on. report.csv has each request's.",
            "",
        ]
    for e in report.get("engines", []):
        spec = e.get("speculation") or []
        if not spec:
            continue
        lines += [f"## Speculative decoding: {e['name']}", ""]
        rows = [
            [
                s["level"],
                f"{s['accepted']:,.0f} / {s['drafted']:,.0f}",
                pct(s["acceptance"]),
                num(s["mean_length"], 2),
                num(s["decode_tps"]),
                num(s["baseline_tps"]),
                f"{s['speedup']:.2f}×" if s.get("speedup") else DASH,
            ]
            for s in spec
        ]
        lines += table(
            [
                "level",
                "accepted / drafted",
                "acceptance",
                "mean acceptance length",
                "decode tok/s (median)",
                "without speculation",
                "speed-up",
            ],
            rows,
        )
        lines += [
            "Acceptance = Σaccepted ÷ Σdrafted over the level's requests; mean acceptance "
            "length = 1 + Σaccepted ÷ Σdrafts where the engine counts drafts; the speed-up "
            "is over the same engine without speculation in this run (--compare-spec).",
            "",
        ]
    return lines
