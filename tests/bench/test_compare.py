"""``infertop compare`` on real reports: the in-process llama.cpp model (twice, same
settings) and the real llama-server (other settings), small benches made once per module."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
from pathlib import Path

import pytest

from tui.bench.compare.markdown import markdown
from tui.bench.compare.ratios import METRICS, compare_reports, verdict
from tui.bench.compare.samples import RequestSample
from tui.bench.report.files import load_report, write_report
from tui.bench.run.environment import environment
from tui.bench.run.plan import BenchPlan
from tui.bench.run.runner import BenchRunner
from tui.engines.base import EngineSpec

pytestmark = pytest.mark.engine

RUNS, PROMPT = 3, 64
# One thread per engine: on a shared 2-core machine llama.cpp's 2 threads wait on each
# other whenever one is descheduled (measured here at load average 4: a 3-request bench
# took 113 s with 2 threads, 13 s with 1). These tests check what compare computes, not speed.
THREADS = 1


def bench(spec: EngineSpec, out: Path, max_tokens: int) -> Path:
    """A small real bench, written as `infertop bench` writes it."""
    plan = BenchPlan(
        engines=[spec.name], runs=RUNS, warmup=0, prompt_tokens=PROMPT, max_tokens=max_tokens
    )
    result = asyncio.run(BenchRunner(plan, [spec], environment=environment()).run())
    out.mkdir(parents=True)
    write_report(result, out)
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory, model_path):
    from tests.support import real_servers as servers

    root = tmp_path_factory.mktemp("compare")
    local = EngineSpec("local", "llamacpp", model=str(model_path), n_threads=THREADS)
    a1 = bench(local, root / "a1", max_tokens=8)
    a2 = bench(local, root / "a2", max_tokens=8)
    try:
        sp = servers.start_llama_server(model_path, root, threads=THREADS)
    except servers.ServerStartError as e:
        servers.unavailable("llama-server", str(e))
    try:
        b = bench(EngineSpec("ls", "llama-server", url=sp.url), root / "b", max_tokens=10)
    finally:
        sp.stop()
    return {"a1": a1, "a2": a2, "b": b}


def load(*paths: Path) -> list[tuple[Path, dict]]:
    return [(p, load_report(p)) for p in paths]


def headline(report: dict) -> dict:
    return report["summary"]["engines"][0]["levels"][0]


def test_ratios_are_the_ratios_of_the_reports_own_figures(reports):
    (pa, a), (pb, b) = load(reports["a1"], reports["b"])
    result = compare_reports([(pa, a), (pb, b)])
    assert result["bootstrap"]["resamples"] >= 2000
    comp = result["comparisons"][0]
    rows = {r["metric"]: r for r in comp["rows"]}
    assert set(rows) == set(METRICS)
    # paired by position (no common name), at the one level both measured
    assert all(r["engine_a"] == "local" and r["engine_b"] == "ls" for r in rows.values())
    assert all(r["level"] == "c=1" and r["n"] == [RUNS, RUNS] for r in rows.values())
    assert any("paired by position" in n for n in comp["notes"])

    # independently: medians over the records with the statistics module, and the
    # figures tui.bench.stats.aggregate wrote into each report's summary
    def record_median(report: dict, key: str) -> float:
        recs = [r for r in report["engines"][0]["records"] if r["phase"] == "warm"]
        return statistics.median(r["metrics"][key] for r in recs if r["status"] == "ok")

    ha, hb = headline(a), headline(b)
    expected = {
        "decode_tps": record_median(b, "decode_tps") / record_median(a, "decode_tps"),
        "ttft_ms": record_median(b, "ttft_ms") / record_median(a, "ttft_ms"),
        "itl_p50_ms": hb["percentiles"]["itl_ms"]["p50"] / ha["percentiles"]["itl_ms"]["p50"],
        "itl_p90_ms": hb["percentiles"]["itl_ms"]["p90"] / ha["percentiles"]["itl_ms"]["p90"],
        "total_tps": hb["total_tps"] / ha["total_tps"],
    }
    for metric, want in expected.items():
        row = rows[metric]
        assert row["ratio"] == pytest.approx(want, rel=1e-9), metric
        assert row["low"] <= row["ratio"] <= row["high"], metric
        assert row["low"] > 0
        holds_one = row["low"] <= 1.0 <= row["high"]
        assert (row["verdict"] == "no change") == holds_one
    assert rows["decode_tps"]["a"] == pytest.approx(ha["medians"]["decode_tps"]["estimate"])
    # the same inputs give the same output (fixed seed)
    assert compare_reports([(pa, a), (pb, b)]) == result


def test_environment_warning_names_each_differing_field(reports):
    (pa, a), (pb, b) = load(reports["a1"], reports["b"])
    comp = compare_reports([(pa, a), (pb, b)])["comparisons"][0]
    diffs = {d["field"]: d for d in comp["environment_differences"]}
    assert diffs["settings.max_tokens"]["a"] == 8 and diffs["settings.max_tokens"]["b"] == 10
    assert diffs["engine local↔ls.kind"]["a"] == "llamacpp"
    assert diffs["engine local↔ls.kind"]["b"] == "llama-server"
    # the same model file, fingerprinted by path from llama.cpp's parameters (A) and from
    # llama-server's /props model_path (B): no difference there
    assert a["engines"][0]["model_file"]["fingerprint"]
    assert a["engines"][0]["model_file"] == b["engines"][0]["model_file"]
    assert not [f for f in diffs if ".model_file" in f]
    assert "environment.cpu" not in diffs and "environment.hostname" not in diffs
    md = markdown(compare_reports([(pa, a), (pb, b)]))
    assert "Warning: the two runs' environments differ" in md
    assert "- settings.max_tokens: 8 (A) vs 10 (B)" in md


def test_no_warning_when_environment_and_settings_are_the_same(reports):
    (pa, a), (pb, b) = load(reports["a1"], reports["a2"])
    assert a["started_at"] != b["started_at"]  # two separate benches
    result = compare_reports([(pa, a), (pb, b)])
    comp = result["comparisons"][0]
    assert comp["environment_differences"] == []
    assert [r["engine_a"] for r in comp["rows"]] == ["local"] * len(METRICS)
    assert comp["notes"] == []
    assert "Environments match" in markdown(result)


def test_an_older_report_without_a_model_fingerprint_says_so(reports, tmp_path):
    old = json.loads((reports["a2"] / "report.json").read_text())
    for e in old["engines"]:
        del e["model_file"]
    (tmp_path / "report.json").write_text(json.dumps(old))
    comp = compare_reports(load(tmp_path, reports["a1"]))["comparisons"][0]
    diffs = {d["field"]: d for d in comp["environment_differences"]}
    assert diffs["engine local.model_file"]["a"] == "(not recorded)"
    assert any(n.startswith("A predates model file fingerprints") for n in comp["notes"])


def test_cli_markdown_json_and_three_reports(reports, infertop_cmd, cli_env, tmp_path):
    a1, a2, b = (str(reports[k]) for k in ("a1", "a2", "b"))
    out = tmp_path / "compare.md"
    p = subprocess.run(
        [*infertop_cmd, "compare", a1, b, "--out", str(out)],
        env=cli_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout == out.read_text()
    assert "| local → ls | c=1 | decode tok/s |" in p.stdout
    p = subprocess.run(
        [*infertop_cmd, "compare", a1, a2, str(Path(b) / "report.json"), "--json"],
        env=cli_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["schema"] == "infertop.compare/1" and len(data["comparisons"]) == 2
    assert [c["b"] for c in data["comparisons"]] == [a2, str(Path(b) / "report.json")]


def test_cli_rejects_what_is_not_a_report(reports, infertop_cmd, cli_env, tmp_path):
    (tmp_path / "other.json").write_text('{"hello": 1}')
    cases = {
        str(tmp_path / "missing"): "cannot read",
        str(tmp_path / "other.json"): "not an infertop bench report",
        str(tmp_path): "cannot read",  # a folder with no report.json
    }
    for path, reason in cases.items():
        p = subprocess.run(
            [*infertop_cmd, "compare", str(reports["a1"]), path],
            env=cli_env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr.startswith("infertop compare: error: ") and reason in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    p = subprocess.run(
        [*infertop_cmd, "compare", str(reports["a1"])],
        env=cli_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 2 and "two or more reports" in p.stderr
    a1 = str(reports["a1"])
    p = subprocess.run(
        [*infertop_cmd, "compare", a1, a1, a1, "--ui"],
        env=cli_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 2 and "--ui shows two reports side by side (got 3)" in p.stderr


def test_verdict_follows_the_metric_direction():
    assert verdict(1.2, 1.1, 1.3, higher=True) == "better"
    assert verdict(1.2, 1.1, 1.3, higher=False) == "worse"
    assert verdict(0.8, 0.7, 0.9, higher=False) == "better"
    assert verdict(1.2, 0.9, 1.3, higher=True) == "no change"
    assert verdict(1.2, None, None, higher=True) == "too few requests"


FROZEN = Path(__file__).resolve().parents[1] / "app" / "compare_reports"


class RecordingRng:
    """NumPy's generator, keeping the resample indices it hands out."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self.rng = np.random.default_rng(seed)
        self.drawn: list = []

    def integers(self, low, high, size):  # type: ignore[no-untyped-def]
        idx = self.rng.integers(low, high, size=size)
        self.drawn.append(idx)
        return idx


def test_resampled_statistics_equal_the_statistics_of_each_resample(monkeypatch):
    """The vectorised bootstrap (pooled-ITL percentiles from running counts included)
    gives, for each resample, what the plain definitions give on the resampled requests."""
    import tui.bench.compare.boot as boot
    from tui.bench.compare.ratios import statistic
    from tui.bench.compare.samples import level_samples

    level = level_samples(load_report(FROZEN / "b"))[("ls", "c=1")]
    # 12 requests of the real report's 3 (repeated, gap lists varied) and 5 rows a chunk;
    # every other one with gaps that stand for several tokens (weights 1 to 4)
    reqs = []
    for i, r in enumerate(level.requests * 4):
        gaps = tuple(sorted(g * (1 + i / 7) for g in r.itl_token_ms))
        weights = tuple(1 + (j * i) % 4 for j in range(len(gaps))) if i % 2 else ()
        reqs.append(
            RequestSample(
                r.decode_tps, r.ttft_ms, gaps, r.output_tokens, r.duration_s, None, weights
            )
        )
    level.requests = reqs
    monkeypatch.setattr(boot, "MAX_CELLS", 5 * len(reqs))
    rng = RecordingRng(7)
    got = boot.resampled_statistics(level, 13, rng)
    rows = [row for idx in rng.drawn for row in idx]
    assert len(rng.drawn) == 3 and len(rows) == 13  # chunks of 5, 5, 3
    for metric in METRICS:
        stat = statistic(metric, level)
        want = [stat([reqs[i] for i in row]) for row in rows]
        assert list(got[metric]) == pytest.approx(want, rel=1e-12), metric
