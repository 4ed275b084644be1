"""RequestRecord.to_dict: finite values, fresh record fields, timeline/metrics built once."""

from __future__ import annotations

import dataclasses
import json

from tests.bench.synthetic import record


def test_record_dict_is_finite_and_follows_later_field_changes():
    rec = record(0, 50, 1, 10)  # one token: no ITL, decode speed undefined
    rec.metrics = dataclasses.replace(rec.metrics, decode_tps=float("nan"))
    first = rec.to_dict()
    assert first["metrics"]["decode_tps"] is None  # NaN is not JSON
    json.dumps(first, allow_nan=False)
    rec.load_ms = 123.0  # the cold path sets this after the record was made
    second = rec.to_dict()
    assert second["load_ms"] == 123.0 and first["load_ms"] is None
    # the heavy parts (every chunk stamp) are built once and shared by later reports
    assert second["timeline"] is first["timeline"] and second["metrics"] is first["metrics"]
    assert second["timeline"]["chunks"] == [[50_000_000, "w0 ", 1]]
