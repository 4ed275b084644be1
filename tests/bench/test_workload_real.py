"""Workloads against the real llama-server (one slot, SmolLM2): length distributions,
a dataset file and a shared system prompt each happen as asked, checked against the
engine's own counts."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.bench.report.files import build_report
from tui.bench.report.markdown import markdown
from tui.bench.run.dataset import load_dataset
from tui.bench.run.loads import RequestDriver, prompt_counter
from tui.bench.run.plan import BenchPlan
from tui.bench.run.results import BenchResult
from tui.bench.run.runner import BenchRunner
from tui.engines.base import EngineSpec, GenerationRequest
from tui.engines.registry import create_engine

pytestmark = pytest.mark.engine
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.support import real_servers as servers
    from tui.engines.files.default_model import default_model_path

    model = default_model_path()
    assert model is not None
    with servers.running_llama_server(model, tmp_path_factory.mktemp("ls"), ["-c", "2048"]) as sp:
        yield sp.url


async def bench(url: str, **kw: object) -> tuple[BenchResult, dict]:  # type: ignore[type-arg]
    base: dict[str, object] = dict(
        engines=["ls"], runs=6, warmup=0, prompt_tokens=64, max_tokens=8, concurrency=[1]
    )
    base.update(kw)
    p = BenchPlan(**base)  # type: ignore[arg-type]
    p.validate()
    res = await BenchRunner(p, [EngineSpec("ls", "llama-server", url=url)]).run()
    return res, build_report(res, n_boot=200)


def warm(res: BenchResult) -> list:  # type: ignore[type-arg]
    return [r for r in res.engines[0].records() if r.phase == "warm"]


async def test_length_distributions_are_sent_as_drawn(server_url: str) -> None:
    res, report = await bench(
        server_url, input_len="uniform:40,160", output_len="uniform:4,14", seed=3
    )
    recs = warm(res)
    assert len(recs) == 6 and all(r.ok for r in recs)
    for r in recs:
        rng = random.Random(3 * 1_000_003 + r.index)  # the documented draw, redone here
        asked_in, asked_out = rng.randint(40, 160), rng.randint(4, 14)
        assert r.prompt_tokens_target == asked_in and r.max_tokens == asked_out
        assert r.metrics.output_tokens == asked_out  # engine-counted, ignore_eos sent
        # the filler is interpolated at the measured tokens per word: within a few tokens
        assert abs(r.metrics.prompt_tokens - asked_in) <= max(4, 0.05 * asked_in)
    assert len({r.metrics.prompt_tokens for r in recs}) > 1
    w = report["summary"]["engines"][0]["levels"][0]["workload"]
    assert w["output"]["exact"] == w["output"]["n"] == 6
    assert "## Workload" in markdown(report) and "`--input-len uniform:40,160`" in markdown(report)


async def test_dataset_prompts_are_the_files(server_url: str) -> None:
    path = DATA / "prompts_sample.jsonl"
    res, report = await bench(server_url, dataset=str(path))
    prompts = load_dataset(path).prompts
    engine = create_engine(EngineSpec("ls", "llama-server", url=server_url))
    await engine.load()
    driver = RequestDriver(engine, "ls", time.perf_counter_ns(), threading.Event())
    count, _how = await prompt_counter(engine, driver, [])
    try:
        for r in warm(res):
            assert r.ok and r.prompt_tokens_target is None  # a dataset prompt has no target
            # the engine's count of dataset prompt i mod n, asked of it again now
            text = prompts[r.index % len(prompts)]
            n = await count(GenerationRequest.from_prompt(text))
            assert r.metrics.prompt_tokens == n
    finally:
        await engine.close()
    assert report["plan"]["dataset"] == str(path)


async def test_a_shared_prefix_is_served_from_the_cache_when_asked(server_url: str) -> None:
    prefix = 200
    res, report = await bench(server_url, shared_prefix=prefix, prefix_cache=True, runs=4)
    recs = sorted(warm(res), key=lambda r: r.t_start_s)
    assert all(r.ok for r in recs) and all(r.metrics.prompt_tokens >= prefix for r in recs)
    # one slot, one after another: every request after the first reuses the shared
    # system prompt (llama-server's timings.cache_n), the first cannot
    later = [r.timeline.truth.cached_tokens for r in recs[1:]]
    assert all(c is not None and c >= 0.9 * prefix for c in later), later
    w = report["summary"]["engines"][0]["levels"][0]["workload"]
    assert w["cached_tokens"]["max"] >= 0.9 * prefix
    assert any("the bench asks for it" in n for n in report["summary"]["fairness"])
    # without --prefix-cache the bench sends cache_prompt false: nothing is reused
    res, _ = await bench(server_url, shared_prefix=prefix, runs=3)
    assert [r.timeline.truth.cached_tokens for r in warm(res)] == [0, 0, 0]


async def test_multi_turn_sessions_grow_turn_by_turn(server_url: str) -> None:
    # one user, 6 requests as two conversations of 3 turns; the prefix cache asked for,
    # so each turn can reuse the conversation so far
    res, report = await bench(server_url, runs=6, turns=3, prefix_cache=True, max_tokens=12)
    recs = sorted(warm(res), key=lambda r: r.t_start_s)
    assert [(r.session, r.turn) for r in recs] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    assert all(r.ok and r.metrics.output_tokens == 12 for r in recs)
    for a, b in zip(recs, recs[1:]):
        if b.turn == 1:
            # a new conversation starts short again
            assert b.metrics.prompt_tokens < a.metrics.prompt_tokens
            continue
        # turn t + 1 holds turn t's prompt, its 12-token answer and a new user message
        # (engine-counted; re-tokenizing the answer text may merge a token or two)
        assert b.metrics.prompt_tokens >= a.metrics.prompt_tokens + 12 + 10
        # and llama-server served the conversation so far from its cache
        assert b.timeline.truth.cached_tokens >= a.metrics.prompt_tokens - 2
    by_turn = report["summary"]["engines"][0]["levels"][0]["workload"]["by_turn"]
    assert [t["turn"] for t in by_turn] == [1, 2, 3]
    medians = [t["prompt_tokens_median"] for t in by_turn]
    assert medians == sorted(medians) and medians[0] < medians[-1]
    assert "by turn, median prompt tokens" in markdown(report)


async def test_output_lengths_from_a_file_are_sent_and_honoured(
    server_url: str, tmp_path: Path
) -> None:
    lengths = tmp_path / "out.txt"
    lengths.write_text("3\n9\n5\n")
    res, _ = await bench(server_url, output_len=f"file:{lengths}", runs=5)
    recs = warm(res)
    assert len(recs) == 5
    for r in recs:
        rng = random.Random(r.index)  # seed 0: Random(0·1000003 + i); no input draw first
        assert r.max_tokens == rng.choice((3, 9, 5))
        assert r.ok and r.metrics.output_tokens == r.max_tokens
