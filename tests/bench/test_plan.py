"""Bench parameters: parsing, presets and validation (each error is one clear line)."""

from __future__ import annotations

import pytest

from tui.bench.run.plan import BenchError, BenchPlan, parse_concurrency, parse_slo, preset_values


def test_concurrency_parses_sorts_and_dedupes():
    assert parse_concurrency("16, 1,8,8") == [1, 8, 16]


@pytest.mark.parametrize("text", ["", "1,,8", "1,x", "1.5", "-1", "0", "1;8"])
def test_bad_concurrency_lists(text):
    with pytest.raises(BenchError, match="concurrency"):
        parse_concurrency(text)


def test_slo_parses():
    assert parse_slo("ttft_ms=500, tpot_ms=50") == {"ttft_ms": 500.0, "tpot_ms": 50.0}


@pytest.mark.parametrize("text", ["ttft=5", "ttft_ms", "ttft_ms=abc", "tpot_ms=-1"])
def test_bad_slo(text):
    with pytest.raises(BenchError, match="slo"):
        parse_slo(text)


def test_seed_post_preset():
    v = preset_values("seed-post")
    assert v == {
        "concurrency": [1],
        "n_ctx": 2048,
        "temperature": 0.7,
        "max_tokens": 500,
        "runs": 50,
    }
    with pytest.raises(BenchError, match="unknown preset 'nope'"):
        preset_values("nope")


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"runs": 0}, "--runs must be at least 1"),
        ({"warmup": -1}, "--warmup"),
        ({"rate": 0.0}, "--rate"),
        ({"max_tokens": 0}, "--max-tokens"),
        ({"prompt_tokens": 0}, "--prompt-tokens"),
        ({"temperature": -0.1}, "--temperature"),
        ({"n_ctx": 100, "prompt_tokens": 64, "max_tokens": 64}, "exceed the context size 100"),
    ],
)
def test_validation(kw, msg):
    with pytest.raises(BenchError, match=msg):
        BenchPlan(engines=["a"], **kw).validate()


def test_request_count_plan():
    p = BenchPlan(engines=["a"], runs=3, warmup=2, concurrency=[1, 4], rate=2.0, cold=True)
    assert p.cold_runs == 3
    assert p.requests_per_engine() == 2 + 3 + 3 + 12 + 3
    assert BenchPlan(engines=["a"], runs=50, cold=True).cold_runs == 5
