"""The engine's own account of a level, from two scrapes of its /metrics (hand-computed).

The scrape texts follow the engines' exposition: vLLM's histograms (``_bucket{le=...}``,
``_count``, ``_sum``) and counters, llama-server's ``llamacpp:*_total`` counters. The
real servers are exercised in tests/http/test_level_truth_real.py.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace

import pytest

from tui.bench.run.level_truth import (
    LevelTruth,
    llama_server_level_truth,
    pause_between,
    vllm_level_truth,
)
from tui.transport.prometheus import parse

BOUNDS = (0.1, 0.25, 0.5, 1.0)


def histogram(name: str, cumulative: tuple[int, ...], total: float) -> str:
    """A histogram's lines: cumulative bucket counts per BOUNDS, then +Inf = the count."""
    lines = [f"# TYPE {name} histogram"]
    for le, n in zip(BOUNDS, cumulative, strict=True):
        lines.append(f'{name}_bucket{{le="{le}",model_name="m"}} {n}')
    lines.append(f'{name}_bucket{{le="+Inf",model_name="m"}} {cumulative[-1]}')
    lines.append(f'{name}_count{{model_name="m"}} {cumulative[-1]}')
    lines.append(f'{name}_sum{{model_name="m"}} {total}')
    return "\n".join(lines)


def vllm_scrape(ttft: tuple[int, ...], ttft_sum: float, prompt: int, gen: int, t: float):  # type: ignore[no-untyped-def]
    text = "\n".join(
        [
            histogram("vllm:time_to_first_token_seconds", ttft, ttft_sum),
            histogram("vllm:e2e_request_latency_seconds", ttft, ttft_sum * 10),
            "# TYPE vllm:prompt_tokens_total counter",
            f'vllm:prompt_tokens_total{{model_name="m"}} {prompt}',
            "# TYPE vllm:generation_tokens_total counter",
            f'vllm:generation_tokens_total{{model_name="m"}} {gen}',
            "",
        ]
    )
    return parse(text, t=t)


def test_vllm_level_is_the_difference_of_two_scrapes():
    # before: 2 requests already (both under 0.1 s); the level adds 4: TTFTs of 0.2,
    # 0.2, 0.4 and 0.8 s (buckets ≤0.25: 2, ≤0.5: 1, ≤1.0: 1), sum 1.6 s
    a = vllm_scrape((2, 2, 2, 2), 0.1, 100, 50, t=10.0)
    b = vllm_scrape((2, 4, 5, 6), 1.7, 100 + 4 * 64, 50 + 4 * 32, t=20.0)
    truth = vllm_level_truth(a, b)
    assert truth is not None
    assert truth["requests"] == 4
    assert truth["prompt_tokens"] == 256 and truth["generation_tokens"] == 128
    ttft = truth["histograms"]["ttft_ms"]
    assert ttft["count"] == 4 and ttft["mean"] == pytest.approx(400.0)
    # p50: rank 2 reaches the (0.1, 0.25] bucket's end exactly -> 250 ms
    assert ttft["p50"] == pytest.approx(250.0)
    # p90: rank 3.6 lies in (0.5, 1.0], 0.6 of the way through its one observation
    assert ttft["p90"] == pytest.approx(800.0)
    assert "e2e_ms" in truth["histograms"] and "queue_ms" not in truth["histograms"]


def test_a_restarted_vllm_counts_from_zero_and_no_histograms_means_no_account():
    a = vllm_scrape((5, 5, 5, 5), 1.0, 1000, 500, t=1.0)
    b = vllm_scrape((0, 1, 1, 1), 0.2, 64, 32, t=2.0)  # the server restarted in between
    truth = vllm_level_truth(a, b)
    assert truth is not None and truth["histograms"]["ttft_ms"]["count"] == 1
    assert truth["prompt_tokens"] is None  # a counter that went down gives no delta
    assert vllm_level_truth(parse("x 1\n"), parse("x 2\n")) is None


def llama_scrape(prompt: int, prompt_s: float, pred: int, pred_s: float, calls: int):  # type: ignore[no-untyped-def]
    names = {
        "llamacpp:prompt_tokens_total": prompt,
        "llamacpp:prompt_seconds_total": prompt_s,
        "llamacpp:tokens_predicted_total": pred,
        "llamacpp:tokens_predicted_seconds_total": pred_s,
        "llamacpp:n_decode_total": calls,
    }
    return parse("".join(f"# TYPE {k} counter\n{k} {v}\n" for k, v in names.items()))


def test_llama_server_level_from_its_counters():
    a = llama_scrape(100, 1.0, 200, 4.0, 200)
    # the level: 4 requests of 128 prompt tokens (2 s of prompt time in all) and 32
    # output tokens each (128 tokens, 3.2 s of slot decode time, in 80 decode calls)
    b = llama_scrape(100 + 512, 3.0, 200 + 128, 7.2, 280)
    truth = llama_server_level_truth(a, b)
    assert truth is not None
    assert truth["prompt_tokens"] == 512 and truth["generation_tokens"] == 128
    assert truth["prefill_tps_per_slot"] == pytest.approx(256.0)
    assert truth["decode_tps_per_slot"] == pytest.approx(40.0)
    assert truth["tokens_per_decode_call"] == pytest.approx(1.6)
    assert llama_server_level_truth(parse("x 1\n"), parse("x 2\n")) is None


class FakeEngine:
    """An engine's hooks as the bench uses them: a scrape and a call counter."""

    kind = "llama-server"

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.request_truth = "each"
        self.scrapes = [llama_scrape(0, 0.0, 0, 0.0, 0), llama_scrape(64, 0.5, 16, 0.4, 16)]

    async def metrics_scrape(self):  # type: ignore[no-untyped-def]
        self.calls["GET /metrics"] += 1
        return self.scrapes.pop(0)


@pytest.mark.parametrize(("c", "mode"), [(1, "chained"), (4, "off"), (None, "off")])
def test_a_level_is_bracketed_and_its_engine_set_for_it(c, mode):
    async def level() -> tuple:  # type: ignore[type-arg]
        engine = FakeEngine()
        truth = LevelTruth(engine, c)
        await truth.begin()
        during = engine.request_truth
        engine.calls["POST /tokenize"] += 1  # something else the bench sent meanwhile
        result = await truth.end(finished=1)
        return during, engine.request_truth, result

    during, after, (account, extra) = asyncio.run(level())
    assert during == mode and after == "each"  # restored once the level is over
    assert account is not None and account["generation_tokens"] == 16
    assert extra == {"GET /metrics": 2, "POST /tokenize": 1}


def test_pause_between_sums_the_gaps_of_sequential_requests():
    recs = [
        SimpleNamespace(t_start_s=0.0, t_end_s=1.0, status="ok"),
        SimpleNamespace(t_start_s=1.25, t_end_s=2.0, status="ok"),
        SimpleNamespace(t_start_s=2.5, t_end_s=3.0, status="failed"),
        SimpleNamespace(t_start_s=9.0, t_end_s=9.5, status="cancelled"),
    ]
    assert pause_between(recs) == pytest.approx(0.75)
