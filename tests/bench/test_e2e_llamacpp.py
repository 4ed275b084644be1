"""End-to-end bench with the real in-process llama.cpp engine on the default model."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest

pytestmark = pytest.mark.engine


def test_bench_llamacpp_end_to_end(infertop_cmd, cli_env, tmp_path, model_path, one_thread_config):
    out = tmp_path / "report"
    p = subprocess.run(
        [
            *infertop_cmd,
            "bench",
            "--config",
            str(one_thread_config),
            "--runs",
            "3",
            "--warmup",
            "1",
            "--max-tokens",
            "16",
            "--prompt-tokens",
            "96",
            "--cold",
            "--out",
            str(out),
        ],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "local: 6 ok, 0 failed" in p.stdout  # 3 cold + 3 warm

    report = json.loads((out / "report.json").read_text())
    assert report["partial"] is False
    assert report["environment"]["cpu_count"] >= 1
    assert "llama-cpp-python" in report["environment"]["versions"]
    eng = report["engines"][0]
    assert eng["kind"] == "llamacpp" and eng["info"]["model"].startswith("SmolLM2")
    warm = [r for r in eng["records"] if r["phase"] == "warm"]
    assert len(warm) == 3 and all(r["status"] == "ok" for r in warm)
    for r in warm:
        m = r["metrics"]
        assert m["output_tokens"] == 16 and m["output_tokens_source"] == "usage"  # ignore_eos
        assert m["prefill_tps_source"] == "engine"  # llama.cpp's own prefill timing
        assert 0 < m["ttft_ms"] < m["e2e_ms"]
        assert 0.5 < m["decode_tps_vs_engine"] < 1.5  # client vs llama.cpp perf context
        assert r["engine_truth"]["source"] == "llama.cpp perf context"

    s = report["summary"]["engines"][0]
    assert s["capacity"] == 1 and s["capacity_source"] == "kind"
    assert s["prompt"]["method"] == "usage probe"
    assert abs(s["prompt"]["counted_tokens"] - 96) <= 2
    # every request's prompt is distinct but of the same engine-counted length
    lens = {r["metrics"]["prompt_tokens"] for r in warm}
    assert all(abs(n - s["prompt"]["counted_tokens"]) <= 1 for n in lens)
    assert "reload" in s["cold_method"]
    assert s["cold"]["ok"] == 3 and s["cold"]["load_ms"]["estimate"] > 0
    c1 = s["levels"][0]
    assert c1["label"] == "c=1" and c1["eta"] == pytest.approx(1.0)
    assert c1["medians"]["decode_tps"]["low"] <= c1["medians"]["decode_tps"]["estimate"]

    assert eng["request_controls"]["cache_prompt"].startswith("enforced: the context is reset")
    notes = report["summary"]["fairness"]
    cache = next(n for n in notes if n.startswith("local: prompt-cache reuse"))
    assert "reported 0 cached prompt tokens on all 6" in cache  # 3 cold + 3 warm
    assert any(n.startswith("local: output length fixed: all 6 answers had 16") for n in notes)

    rows = list(csv.DictReader((out / "report.csv").open()))
    assert len(rows) == len(eng["records"])
    md = (out / "report.md").read_text()
    assert "| local | llamacpp (llama.cpp built for this CPU) | SmolLM2" in md  # the build named
    assert "## Cold vs warm" in md
