"""report.csv: one row per request (all phases), from the report.json dictionary."""

from __future__ import annotations

import csv
import io
from typing import Any

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
)
COLUMNS = (*RECORD_COLUMNS, *METRIC_COLUMNS, "error_kind", "error")


def rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for engine in report["engines"]:
        for rec in engine["records"]:
            m = rec["metrics"]
            row = {col: rec.get(col) for col in RECORD_COLUMNS}
            row.update((col, m.get(col)) for col in METRIC_COLUMNS)
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


def csv_text(report: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in rows(report):
        w.writerow({k: cell(v) for k, v in row.items()})
    return buf.getvalue()
