"""Is a report.json (perhaps someone else's) one ``compare`` can read? Types and finite
numbers, checked where compare reads them.

``json.loads`` takes ``NaN``, numbers of any size and any shape; compare then sorts,
subtracts and resamples what it finds. :func:`report_problem` names the first thing that
is not as infertop writes it (``engines[2].records[17].t_end_s is not a finite
number``), so the caller refuses the file with that reason instead of a traceback.
"""

from __future__ import annotations

import math
from typing import Any

_OPTIONAL_TABLES = ("environment", "plan", "summary")
_ENGINE_TABLES = ("info", "spec", "request_controls")
_METRIC_NUMBERS = ("decode_tps", "ttft_ms", "ttfo_ms")
MAX_ITL_TOKENS = 2**40  # tokens one record's ITL values may stand for (compare sums them)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _record_problem(rec: Any) -> str | None:
    if not isinstance(rec, dict):
        return "is not an object"
    for key in ("phase", "status"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f".{key} is not a string"
    for key in ("t_start_s", "t_end_s"):
        if not _number(rec.get(key)):
            return f".{key} is not a finite number"
    m = rec.get("metrics")
    if m is None:
        return None
    if not isinstance(m, dict):
        return ".metrics is not an object"
    for key in _METRIC_NUMBERS:
        if m.get(key) is not None and not _number(m[key]):
            return f".metrics.{key} is not a finite number"
    tokens = m.get("output_tokens")
    if tokens is not None and not (isinstance(tokens, int) and not isinstance(tokens, bool)):
        return ".metrics.output_tokens is not a whole number"
    if isinstance(tokens, int) and tokens < 0:
        return ".metrics.output_tokens is negative"
    itl = m.get("itl_token_ms")
    if itl is not None:
        if not isinstance(itl, list):
            return ".metrics.itl_token_ms is not a list"
        if not all(v is None or _number(v) for v in itl):
            return ".metrics.itl_token_ms holds something not a finite number"
    return _weights_problem(m.get("itl_token_weights"), itl)


def _weights_problem(weights: Any, itl: Any) -> str | None:
    """The per-token ITL weights: one whole number ≥ 1 per value, ≤ MAX_ITL_TOKENS in all."""
    if weights is None:
        return None
    if not isinstance(weights, list) or len(weights) != len(itl or []):
        return ".metrics.itl_token_weights is not a list as long as itl_token_ms"
    if not all(type(w) is int and w >= 1 for w in weights):
        return ".metrics.itl_token_weights holds something not a whole number >= 1"
    if sum(weights) > MAX_ITL_TOKENS:
        return f".metrics.itl_token_weights add up to more than {MAX_ITL_TOKENS} tokens"
    return None


def report_problem(data: dict[str, Any]) -> str | None:
    """None when ``data`` (a report's top-level object) is readable by compare, else
    where and what is wrong."""
    for key in _OPTIONAL_TABLES:
        if data.get(key) is not None and not isinstance(data[key], dict):
            return f"{key} is not an object"
    engines = data.get("engines")
    if not isinstance(engines, list):
        return "engines is not a list"
    for i, eng in enumerate(engines):
        where = f"engines[{i}]"
        if not isinstance(eng, dict):
            return f"{where} is not an object"
        if not isinstance(eng.get("name"), str):
            return f"{where}.name is not a string"
        for key in _ENGINE_TABLES:
            if eng.get(key) is not None and not isinstance(eng[key], dict):
                return f"{where}.{key} is not an object"
        records = eng.get("records")
        if records is None:
            continue
        if not isinstance(records, list):
            return f"{where}.records is not a list"
        for j, rec in enumerate(records):
            why = _record_problem(rec)
            if why:
                return f"{where}.records[{j}]{why if why.startswith('.') else ' ' + why}"
    return None
