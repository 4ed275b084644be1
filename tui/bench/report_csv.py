"""report.csv: one row per request (all phases), from the report.json dictionary."""

from __future__ import annotations

import csv
import io
from typing import Any

COLUMNS = (
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
    "error_kind",
    "error",
)
_RECORD_KEYS = {
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
}


def rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for engine in report["engines"]:
        for rec in engine["records"]:
            m = rec["metrics"]
            row = {}
            for col in COLUMNS:
                if col in _RECORD_KEYS:
                    row[col] = rec.get(col)
                elif col == "error_kind":
                    row[col] = rec["timeline"].get("error_kind")
                else:
                    row[col] = m.get(col)
            out.append(row)
    return out


def csv_text(report: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in rows(report):
        w.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()
