"""report.md's reasoning: a table of TTFO, thinking time and the reasoning/answer split
per level, and their definitions — only in a report where some request reasoned
(tui.bench.stats.reasoning), so a bench without reasoning reads as it always did."""

from __future__ import annotations

from typing import Any

from tui.bench.report.format import DASH, ci, num, table
from tui.bench.report.shape import BenchReport, EngineSummary, LevelSummary

DEFINITIONS = (
    "TTFT counts a first reasoning token as generated text. "
    "TTFO: request sent → first answer token or tool call (the thinking before it "
    "included; = TTFT for a request without reasoning). Thinking time: first reasoning "
    "chunk → first answer chunk (→ last reasoning chunk when no answer followed). "
    "Reasoning tokens R: the engine's count, else its per-chunk counts, else the number of "
    "reasoning chunks (est.); answer tokens = output tokens − R. Reasoning (answer) tok/s: "
    "(tokens − 1) / (last − first chunk of the reasoning (answer))."
)


def _levels(engine: EngineSummary) -> list[LevelSummary]:
    cold = engine.get("cold")  # (.get: a report written before the key existed)
    return list(engine.get("levels") or []) + ([cold] if cold else [])


def run_reasoned(report: BenchReport) -> bool:
    """Some request of some engine's level reasoned (then TTFO is shown beside TTFT)."""
    return any(lv.get("reasoning") for e in report["summary"]["engines"] for lv in _levels(e))


def _tokens(iv: dict[str, Any] | None, estimated: bool) -> str:
    cell = ci(iv)
    return cell + " (est.)" if (estimated and cell != DASH) else cell


def reasoning_markdown(report: BenchReport) -> list[str]:
    """The "Reasoning and answer" section ([] when no request reasoned)."""
    rows, notes = [], []
    estimated = False
    for e in report["summary"]["engines"]:
        for lv in _levels(e):
            r = lv.get("reasoning")
            if not r:
                continue
            med, r_est = r["medians"], r["reasoning_tokens_estimated"]
            a_est = r["answer_tokens_estimated"]
            estimated = estimated or r_est or a_est
            rows.append(
                [
                    e["name"],
                    lv["label"],
                    f"{r['requests']} / {r['ok']}",
                    ci(lv["medians"].get("ttfo_ms")),
                    ci(med.get("thinking_ms")),
                    _tokens(med.get("reasoning_tokens"), r_est),
                    _tokens(med.get("answer_tokens"), a_est),
                    f"{num(r['reasoning_tokens'])} / {num(r['answer_tokens'])}"
                    + (" (est.)" if (r_est or a_est) else ""),
                    _tokens(med.get("reasoning_tps"), r_est),
                    _tokens(med.get("answer_tps"), a_est),
                ]
            )
            if r["answered"] < r["ok"]:
                notes.append(
                    f"- {e['name']} {lv['label']}: {r['ok'] - r['answered']} of {r['ok']} "
                    "requests ended without an answer after their reasoning (no TTFO)"
                )
    if not rows:
        return []
    lines = ["## Reasoning and answer (median [95% CI])", ""]
    lines += table(
        [
            "engine",
            "level",
            "reasoned / ok",
            "TTFO ms",
            "thinking ms",
            "reasoning tokens",
            "answer tokens",
            "Σ reasoning / answer tokens",
            "reasoning tok/s",
            "answer tok/s",
        ],
        rows,
    )
    if estimated:
        notes.append(
            "- (est.): counted from chunks, not by the engine (reasoning tokens: the number "
            "of reasoning chunks; answer tokens: output tokens − reasoning tokens)"
        )
    return lines + ([*notes, ""] if notes else [])
