"""The cells and tables of report.md and the terminal: numbers, intervals, percentiles."""

from __future__ import annotations

from typing import Any

DASH = "—"
METRIC_WORDS = {
    "decode_tps": "decode tok/s",
    "prefill_tps": "prompt tok/s",
    "ttft_ms": "TTFT",
    "ttfo_ms": "TTFO",
    "e2e_ms": "e2e latency",
}


def num(x: float | int | None, digits: int = 1) -> str:
    if x is None:
        return DASH
    if isinstance(x, int):
        return str(x)
    return f"{x:,.{digits}f}"


def ci(iv: dict[str, Any] | None, digits: int = 1) -> str:
    """ "95.1 [93.0, 96.2]" — a median and its 95 % bootstrap interval."""
    if not iv:
        return DASH
    if iv.get("low") is None:
        return f"{num(iv['estimate'], digits)} (n=1)"
    return f"{num(iv['estimate'], digits)} [{num(iv['low'], digits)}, {num(iv['high'], digits)}]"


def pcts(p: dict[str, Any], digits: int = 1) -> str:
    if not p or not p.get("n"):
        return DASH
    return " / ".join(num(p[k], digits) for k in ("p50", "p90", "p95", "p99"))


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def last_request_line(rec: Any) -> str:
    """One finished request (a bench record) on one line: "last: TTFT 100 ms, 92.0 tok/s";
    with TTFO beside TTFT when they differ (it reasoned first: "TTFO no answer" when no
    answer came). The bench's terminal progress and its screen in the TUI both show it."""
    if not rec.ok:
        return f"last: {rec.status}"
    m = rec.metrics
    ttft = f"{m.ttft_ms:.0f} ms" if m.ttft_ms is not None else DASH
    tps = f"{m.decode_tps:.1f} tok/s" if m.decode_tps is not None else DASH
    if m.ttfo_ms != m.ttft_ms:  # it reasoned: the answer began later than the first token
        ttfo = f"{m.ttfo_ms:.0f} ms" if m.ttfo_ms is not None else "no answer"
        return f"last: TTFT {ttft}, TTFO {ttfo}, {tps}"
    return f"last: TTFT {ttft}, {tps}"
