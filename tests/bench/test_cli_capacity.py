"""`infertop bench`'s open-loop, SLO and workload flags as a user types them (the pace
engine: known timing, no model), and their refusals."""

from __future__ import annotations

import json

from tests.bench.test_cli_bench import _pace_config, one_line_error, pace_bench


def test_open_loop_slo_and_workload_flags_reach_the_report(cli_env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = _pace_config(tmp_path, token_ms=2.0, ttft_ms=5.0)
    out = tmp_path / "o"
    p = pace_bench(
        cli_env,
        cfg,
        "--concurrency",
        "none",
        "--warmup",
        "0",
        "--rate",
        "20",
        "--arrival",
        "gamma",
        "--burstiness",
        "0.5",
        "--ramp-up",
        "0.5",
        "--duration",
        "1.5",
        "--output-len",
        "uniform:3,6",
        "--slo",
        "ttft_ms=1000,e2e_ms=5000",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((out / "report.json").read_text())
    plan = report["plan"]
    assert (plan["arrival"], plan["burstiness"], plan["ramp_s"], plan["duration_s"]) == (
        "gamma",
        0.5,
        0.5,
        1.5,
    )
    assert plan["output_len"] == "uniform:3,6" and plan["concurrency"] == []
    (lv,) = report["summary"]["engines"][0]["levels"]
    assert lv["label"] == "rate=20 gamma(k=0.5)"
    assert lv["arrivals"]["sent_requests"] == lv["arrivals"]["planned"] == lv["requests"]
    assert (
        3
        <= lv["workload"]["output"]["asked"]["min"]
        <= lv["workload"]["output"]["asked"]["max"]
        <= 6
    )
    assert "SLO attainment" in p.stdout and "SLO: A request is good" in p.stdout
    md = (out / "report.md").read_text()
    assert "## Arrivals: asked, scheduled, sent" in md and "## Workload" in md


def test_find_capacity_without_an_slo_is_refused(cli_env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = _pace_config(tmp_path)
    one_line_error(
        pace_bench(cli_env, cfg, "--find-capacity", "--out", str(tmp_path / "o")), "needs --slo"
    )


def test_a_bad_dataset_is_refused_before_anything_runs(cli_env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = _pace_config(tmp_path)
    bad = tmp_path / "d.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": [1]}\n')
    p = pace_bench(cli_env, cfg, "--dataset", str(bad), "--out", str(tmp_path / "o"))
    one_line_error(p, f"{bad}: line 2, key 'prompt': the prompt is not a string")
    assert not (tmp_path / "o" / "report.json").exists()
