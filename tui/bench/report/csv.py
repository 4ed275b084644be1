"""report.csv: one row per request (all phases), from the report.json dictionary."""

from __future__ import annotations

import csv
import io
from typing import Any

from tui.bench.report.shape import BenchReport

RECORD_COLUMNS = (  # taken from the request's record
    "engine",
    "phase",
    "level",
    "concurrency",
    "rate",
    "index",
    "request_id",
    "status",
    "t_start_s",
    "t_end_s",
    "load_ms",
    "pre_send_wait_ms",
    "prompt_tokens_target",  # asked of the request (tui/bench/run/workload.py)
    "max_tokens",
    "session",  # --turns (tui/bench/run/sessions.py)
    "turn",
)
METRIC_COLUMNS = (  # taken from its metrics (tui/core/metrics.py)
    "ttft_ms",
    "ttfr_ms",
    "itl_ms_p50",
    "itl_ms_p90",
    "tpot_ms",
    "e2e_ms",
    "decode_tps",
    "prefill_tps",
    "prefill_tps_source",
    "prompt_tokens",
    "output_tokens",
    "output_tokens_source",
    "engine_prefill_ms",
    "engine_decode_tps",
    # reasoning apart from the answer (TTFO = TTFT and A = N for a request without it)
    "ttfo_ms",
    "thinking_ms",
    "reasoning_tokens",
    "reasoning_tokens_source",
    "answer_tokens",
    "answer_tokens_estimated",
    "reasoning_tps",
    "answer_tps",
)
# j_per_token: the request's own energy ÷ its tokens, only where it ran alone (a c=1
# level, cold starts: tui/bench/energy.py); empty otherwise
WHY_COLUMNS = (  # its breakdown and verdict (tui/core/verdict.py)
    "verdict",
    "why",
    "queue_ms",
    "queue_source",
    "cached_tokens",
    "computed_tokens",
    "engine_decode_ms",
    "transport_ms",
    "draft_n",
    "draft_n_accepted",
)
COLUMNS = (*RECORD_COLUMNS, *METRIC_COLUMNS, *WHY_COLUMNS, "j_per_token", "error_kind", "error")


def _request_energy(report: BenchReport) -> dict[tuple[str, str], float]:
    """(engine, request id) → J/token, from the levels' energy (requests that ran alone)."""
    out: dict[tuple[str, str], float] = {}
    for e in report.get("summary", {}).get("engines", []):  # (a report missing its parts)
        cold = e.get("cold")
        for lv in [*e.get("levels", []), *([cold] if cold else [])]:
            per = (lv.get("energy") or {}).get("requests") or {}
            out.update(((e["name"], rid), v) for rid, v in per.items())
    return out


def rows(report: BenchReport) -> list[dict[str, Any]]:
    out = []
    energy = _request_energy(report)
    for engine in report["engines"]:
        for rec in engine["records"]:
            m = rec["metrics"]
            row = {col: rec.get(col) for col in RECORD_COLUMNS}
            row.update((col, m.get(col)) for col in METRIC_COLUMNS)
            v = rec.get("verdict") or {}
            row.update(
                verdict=v.get("kind"),
                why=v.get("text"),
                queue_ms=v.get("queue_ms"),
                queue_source=v.get("queue_source"),
                cached_tokens=v.get("cached_tokens"),
                computed_tokens=v.get("computed_tokens"),
                engine_decode_ms=v.get("decode_ms"),
                transport_ms=v.get("transport_ms"),
                draft_n=v.get("drafted"),
                draft_n_accepted=v.get("accepted"),
            )
            row["j_per_token"] = energy.get((engine["name"], str(rec.get("request_id"))))
            row["error_kind"] = rec["timeline"].get("error_kind")
            row["error"] = m.get("error")
            out.append(row)
    return out


# A spreadsheet reads a cell that starts with one of these as a formula (=HYPERLINK(...),
# =cmd|...): "CSV injection". Text cells that do are written with a leading apostrophe,
# which spreadsheets show as text; numbers are written as numbers.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """A CSV cell: None as empty, a text that a spreadsheet would run as a formula
    neutralised with a leading ``'``, anything else unchanged."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_text(report: BenchReport) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in rows(report):
        w.writerow({k: cell(v) for k, v in row.items()})
    return buf.getvalue()
