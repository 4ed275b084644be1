"""TTFO as an SLO objective (``--slo ttfo_ms=MS``): who is good under it, the capacity
search's early stop, its definition in the report, and ``infertop bench`` end to end with
the pace engine thinking before it answers (known timing: tests/bench/pace_engine.py)."""

from __future__ import annotations

import json

import pytest

from tests.bench.synthetic import MS, level, reasoning_record, result
from tests.bench.test_cli_bench import _pace_config, pace_bench
from tui.bench.report.files import build_report
from tui.bench.report.markdown import markdown
from tui.bench.run.capacity import hopeless
from tui.bench.run.plan import BenchError, parse_slo
from tui.bench.stats.aggregate import summarize_level
from tui.bench.stats.slo import SLO_DEFINITION, goodput, meets_slo, slo_definition
from tui.core.events import REASONING, RequestSent, TextChunk
from tui.core.timeline import RequestTimeline


def thinker(ttft_ms: float, think: int, index: int = 0):  # type: ignore[no-untyped-def]
    """TTFT = ttft_ms; TTFO = ttft_ms + think · 10 ms (then 5 answer tokens)."""
    return reasoning_record(index * 1000, ttft_ms, think, 5, 10, index=index, counted="usage")


def test_meeting_ttft_does_not_meet_a_ttfo_objective() -> None:
    fast_thinker = thinker(50, 30)  # TTFT 50, TTFO 350
    assert fast_thinker.metrics.ttfo_ms == pytest.approx(350)
    assert meets_slo(fast_thinker, {"ttft_ms": 200})
    assert not meets_slo(fast_thinker, {"ttfo_ms": 200})
    assert not meets_slo(fast_thinker, {"ttft_ms": 200, "ttfo_ms": 200})


def test_meeting_a_ttfo_objective_does_not_meet_a_tighter_ttft_one() -> None:
    slow_start = thinker(150, 2, index=1)  # TTFT 150, TTFO 170
    assert meets_slo(slow_start, {"ttfo_ms": 200})
    assert not meets_slo(slow_start, {"ttft_ms": 100})
    g = goodput(
        [thinker(50, 30), slow_start], {"ttft_ms": 100, "ttfo_ms": 200}, wall=2.0
    )  # the first misses TTFO only, the second TTFT only: neither is good
    assert (g["good"], g["judged"]) == (0, 2)
    assert g["per_objective"] == {"ttft_ms": 0.5, "ttfo_ms": 0.5}


def test_no_answer_after_the_thinking_is_not_good_under_ttfo() -> None:
    silent = reasoning_record(0, 50, 5, 0, 10)  # reasoned, never answered
    assert silent.ok and silent.metrics.ttfo_ms is None
    assert meets_slo(silent, {"ttft_ms": 100}) and not meets_slo(silent, {"ttfo_ms": 1e9})


def test_level_goodput_judges_ttfo_per_request() -> None:
    recs = [thinker(50, k, index=k) for k in (1, 5, 10, 20, 40)]  # TTFO 60 … 450
    s = summarize_level(level(recs, 1), None, {"ttfo_ms": 150}, 45)
    assert s["goodput"]["good"] == 3 and s["goodput"]["per_objective"] == {"ttfo_ms": 0.6}
    # under TTFT alone all five are good: TTFO is what told them apart
    assert summarize_level(level(recs, 1), None, {"ttft_ms": 150}, 45)["goodput"]["good"] == 5


def test_a_request_still_thinking_past_the_ttfo_limit_cannot_be_good() -> None:
    tl = RequestTimeline()
    tl.add(RequestSent(0))
    tl.add(TextChunk(10 * MS, "hmm", 1, REASONING))
    now = 300 * MS
    assert hopeless(tl, {"ttfo_ms": 200}, now)  # no answer yet, 300 ms in
    assert not hopeless(tl, {"ttft_ms": 200}, now)  # its first token came in time
    assert not hopeless(tl, {"ttfo_ms": 400}, now)  # it may still answer in time
    tl.add(TextChunk(250 * MS, "Hello", 1))
    assert not hopeless(tl, {"ttfo_ms": 200}, now)  # it answered (ended judges it)
    plain = RequestTimeline()
    plain.add(RequestSent(0))
    plain.add(TextChunk(10 * MS, "Hi", 1))
    assert not hopeless(plain, {"ttfo_ms": 200}, now)  # an answer from the first token


def test_ttfo_ms_is_an_slo_key_and_bad_ones_are_named() -> None:
    assert parse_slo("ttfo_ms=800,ttft_ms=200") == {"ttfo_ms": 800.0, "ttft_ms": 200.0}
    with pytest.raises(BenchError, match="ttft_ms, ttfo_ms, tpot_ms, itl_ms, e2e_ms"):
        parse_slo("ttfa_ms=1")
    with pytest.raises(BenchError, match="ttfo_ms: must be a positive"):
        parse_slo("ttfo_ms=-1")


def test_the_definition_defines_ttfo_where_it_is_an_objective() -> None:
    with_ttfo = slo_definition(["ttfo_ms"])
    assert with_ttfo == SLO_DEFINITION
    for words in (
        "TTFT = sent → first token of any kind",
        "TTFO = sent → first answer token or tool call",
        "thinking before it included",
        "TTFO with no answer after the thinking",
    ):
        assert words in with_ttfo
    assert "TTFO" not in slo_definition(["ttft_ms", "e2e_ms"])  # as before TTFO existed
    recs = [thinker(50, 30)]
    md = markdown(build_report(result([level(recs, 1)], slo={"ttfo_ms": 200.0}), n_boot=50))
    assert "SLO: ttfo_ms ≤ 200. " + with_ttfo in md


def test_cli_bench_of_a_thinking_engine_prints_and_writes_ttfo(cli_env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each answer thinks 4 tokens of 20 ms first: TTFO ≥ TTFT + 80 ms by construction
    (a sleep is never early); the objective of 60 ms beyond TTFT's cannot be met."""
    cfg = _pace_config(tmp_path, ttft_ms=5.0, token_ms=20.0, think_tokens=4)
    out = tmp_path / "o"
    p = pace_bench(
        cli_env,
        cfg,
        *("--runs", "3", "--warmup", "0", "--max-tokens", "8", "--prompt-tokens", "20"),
        *("--slo", "ttfo_ms=60", "--out", str(out)),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((out / "report.json").read_text())
    lv = report["summary"]["engines"][0]["levels"][0]
    ttft, ttfo = lv["medians"]["ttft_ms"]["estimate"], lv["medians"]["ttfo_ms"]["estimate"]
    assert ttfo >= ttft + 80
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("p: 3 ok"))
    assert f", TTFT {ttft:.1f} ms, TTFO {ttfo:.1f} ms" in line
    assert lv["goodput"]["good"] == 0 and lv["reasoning"]["reasoning_tokens"] == 12
    assert "SLO: " + SLO_DEFINITION in p.stdout  # the definition, with TTFO's
    md = (out / "report.md").read_text()
    assert "## Reasoning and answer" in md and "TTFO ms p50/90/95/99" in md
    assert (out / "ttfo.svg").is_file()
    header = (out / "report.csv").read_text().splitlines()[0].split(",")
    assert {"ttfo_ms", "thinking_ms", "reasoning_tokens", "answer_tokens"} <= set(header)


def test_find_capacity_on_ttfo_stops_where_the_thinking_alone_misses(cli_env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """TTFO ≥ 5 · 20 ms by construction, so no number of users meets ttfo_ms=50: the
    search finds none, each probe's verdict being what its records say under TTFO."""
    cfg = _pace_config(tmp_path, ttft_ms=5.0, token_ms=20.0, think_tokens=5, slots=4)
    out = tmp_path / "o"
    p = pace_bench(
        cli_env,
        cfg,
        *("--concurrency", "none", "--warmup", "0", "--max-tokens", "7"),
        *("--prompt-tokens", "20", "--find-capacity", "--capacity-by", "concurrency"),
        *("--probe-s", "1", "--capacity-budget", "30", "--slo", "ttfo_ms=50"),
        *("--out", str(out)),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((out / "report.json").read_text())
    e = report["summary"]["engines"][0]
    cap = e["capacity_search"]
    assert cap["interval"][0] is None and cap["probes"]
    assert cap["done_because"] == "no probe passed down to 1 users"
    probes = [r for r in report["engines"][0]["records"] if r["level"].startswith("probe")]
    assert probes and all(
        r["metrics"]["ttfo_ms"] is None or r["metrics"]["ttfo_ms"] > 50 for r in probes
    )
    assert all(p_["good"] == 0 for p_ in cap["probes"])
    assert "capacity at 90.0 % attainment: none found" in p.stdout
