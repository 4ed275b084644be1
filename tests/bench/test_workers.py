"""``--workers``: a concurrency level split across client processes, against the real pace
server (its send times known per token), records merged on one clock."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest

from tests.support.clock_child import send_stamp
from tests.support.made_outcomes import KeptOutcomes
from tui.bench.run.plan import BenchPlan
from tui.bench.run.runner import BenchRunner
from tui.bench.run.workers import default_workers, max_workers, split_streams
from tui.core.outcome import Outcomes
from tui.core.trace_context import TraceMode
from tui.engines.base import EngineSpec


def test_perf_counter_is_one_clock_across_processes():
    """Why worker records merge: a stamp taken in another process falls between this
    process's stamps around it (CLOCK_MONOTONIC is system-wide, not per process)."""
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    before = time.perf_counter_ns()
    p = ctx.Process(target=send_stamp, args=(send,))
    p.start()
    assert recv.poll(60), f"the child sent no stamp (exit code {p.exitcode})"
    child = recv.recv()
    after = time.perf_counter_ns()
    p.join(10)
    assert before < child < after


def test_streams_split_evenly_and_never_to_an_empty_worker():
    assert split_streams(16, 2) == [8, 8]
    assert split_streams(5, 2) == [3, 2]
    assert split_streams(3, 8) == [1, 1, 1]
    assert split_streams(1, 1) == [1]
    assert 1 <= default_workers(1) <= max_workers()
    assert default_workers(10_000) == max_workers()


async def bench_in_two_workers(
    cfg: Any, runs: int, max_tokens: int, trace: TraceMode = "off"
) -> tuple[Any, Any, int, BenchPlan, KeptOutcomes]:
    """Level c = 4 in two worker processes against a pace server of ``cfg``: the
    result, the server, its port, the plan and the outcomes published."""
    from tests.support import pace_server

    port, server, stop = pace_server.start_in_thread(cfg)
    try:
        spec = EngineSpec(
            name="pace", kind="openai", url=f"http://127.0.0.1:{port}", endpoint="completions"
        )
        plan = BenchPlan(
            engines=["pace"], runs=runs, warmup=0, concurrency=[4], prompt_tokens=16,
            max_tokens=max_tokens, workers=2,
        )  # fmt: skip
        keep = KeptOutcomes()
        outcomes = Outcomes()
        outcomes.add(keep)
        runner = BenchRunner(plan, [spec], outcomes=outcomes)
        runner.trace = trace
        res = await runner.run()
    finally:
        stop()
    return res, server, port, plan, keep


async def test_two_workers_merge_records_stamped_against_the_servers_send_times():
    from tests.support import pace_server

    cfg = pace_server.PaceConfig(interval_ms=2.0, ttft_ms=5.0, stamps_kept=64)
    res, server, port, plan, keep = await bench_in_two_workers(cfg, runs=3, max_tokens=12)
    run = res.engines[0]
    assert run.error is None and not res.partial
    (level,) = run.levels
    assert level.complete
    # every request sent is one outcome: the workers' too, and the prompt's calibration
    ids = [o.id for o in keep.seen]
    assert len(ids) == len(set(ids)) and {r.request_id for r in level.records} <= set(ids)
    assert len(ids) == server.stats.requests, (len(ids), server.stats.requests)
    assert {(o.source, o.route, o.api, o.state) for o in keep.seen} == {
        ("bench", "/v1/completions", "openai-completions", "done")
    }
    assert {o.upstream for o in keep.seen} == {f"http://127.0.0.1:{port}"}
    # merged: every request of both workers, each once, each from a worker process
    assert len(level.records) == 4 * 3 and all(r.ok for r in level.records)
    assert sorted(r.worker for r in level.records) == [1] * 6 + [2] * 6
    assert {r.concurrency for r in level.records} == {4}  # the level's c, not a share
    assert len({r.index for r in level.records}) == 12
    assert server.stats.max_active == 4  # both workers' streams were in flight at once
    for r in level.records:
        tl = r.timeline
        assert r.metrics.output_tokens == 12
        assert tl.chunk_ns == sorted(tl.chunk_ns) and tl.t_sent_ns < tl.chunk_ns[0]
        # the worker's stamps are on this process's clock: token i arrives right after the
        # server (a thread of this process) sent it. The server stamps after its write, and
        # under load its thread can wait for the GIL there, so a client stamp may precede
        # it by milliseconds; a per-process clock would be off by seconds or more.
        rid = next(k for k, s in server.seeds.items() if s == plan.seed + r.index)
        sent = server.sent_ns[rid]
        got = [t for t, x in zip(tl.chunk_ns, tl.chunk_text) if x]
        assert len(got) == len(sent) == 12
        lags_ms = sorted((g - s) / 1e6 for g, s in zip(got, sent))
        assert -50 < lags_ms[0] and lags_ms[-1] < 1000, lags_ms
        assert -2 < lags_ms[len(lags_ms) // 2] < 20, lags_ms
    # one time axis: the level's requests overlap across the two processes
    w1 = [r for r in level.records if r.worker == 1]
    w2 = [r for r in level.records if r.worker == 2]
    assert min(r.t_start_s for r in w2) < max(r.t_end_s for r in w1)
    assert min(r.t_start_s for r in w1) < max(r.t_end_s for r in w2)
    assert res.plan.to_dict()["workers"] == 2


async def test_worker_processes_carry_the_benchs_trace_context():
    """With ``--trace-propagation`` every request a worker process sends carries its own
    traceparent, and its record and outcome the same trace and span ids (the spans
    exported for them are the requests the server saw)."""
    from tests.support import pace_server

    cfg = pace_server.PaceConfig(interval_ms=1.0)
    res, server, _, _, keep = await bench_in_two_workers(cfg, 2, 4, trace="propagate")
    (level,) = res.engines[0].levels
    assert level.complete and sorted(r.worker for r in level.records) == [1] * 4 + [2] * 4
    sent = {tp.split("-")[1]: tp.split("-")[2] for tp in server.traceparents if tp}
    assert len(server.traceparents) == len(sent) == len(keep.seen)  # each its own trace
    for r in level.records:
        assert r.trace_id is not None and sent[r.trace_id] == r.span_id
    by_id = {o.id: o for o in keep.seen}
    assert all(
        (by_id[r.request_id].trace_id, by_id[r.request_id].span_id) == (r.trace_id, r.span_id)
        for r in level.records
    )


@pytest.mark.parametrize("value", ["0", "-1"])
def test_bad_workers_is_a_usage_error(infertop_cmd, cli_env, tmp_path, value):
    import subprocess

    p = subprocess.run(
        [*infertop_cmd, "bench", "--workers", value, "--out", str(tmp_path / "o")],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    assert f"infertop bench: error: --workers must be at least 1 (got {value})" in p.stderr


async def test_the_bench_reads_on_its_own_loop_and_other_loops_keep_the_shared_reader():
    import asyncio

    from tui.transport.reader_loop import HttpReader

    with HttpReader.on_running_loop() as reader:
        assert HttpReader.shared() is reader and reader.loop is asyncio.get_running_loop()
        assert await reader.call(asyncio.sleep(0, "ran")) == "ran"
        elsewhere = await asyncio.to_thread(HttpReader.shared)  # another thread, no loop
        assert elsewhere is not reader and elsewhere.alive and elsewhere.loop is not reader.loop
    assert HttpReader.shared() is not reader


async def test_stopping_a_bench_stops_its_workers_and_keeps_what_they_measured():
    import asyncio

    from tests.support import pace_server

    port, _server, stop = pace_server.start_in_thread(pace_server.PaceConfig(interval_ms=5.0))
    try:
        spec = EngineSpec(
            name="pace", kind="openai", url=f"http://127.0.0.1:{port}", endpoint="completions"
        )
        plan = BenchPlan(
            engines=["pace"], runs=40, warmup=0, concurrency=[2], prompt_tokens=16,
            max_tokens=40, workers=2,
        )  # fmt: skip
        runner = BenchRunner(plan, [spec])
        task = asyncio.create_task(runner.run())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            runner.result.engines
            and runner.result.engines[0].levels
            and len(runner.result.engines[0].levels[0].records) >= 2
        ):
            await asyncio.sleep(0.05)
        runner.stop("test stop")
        res = await asyncio.wait_for(task, 30)  # returns: no worker left hanging
    finally:
        stop()
    assert res.partial and res.partial_reason == "test stop"
    (level,) = res.engines[0].levels
    assert not level.complete
    assert 2 <= len(level.records) < 80
    assert any(r.ok for r in level.records)
    assert not multiprocessing.active_children()


@pytest.mark.engine
async def test_two_workers_against_real_llama_server(tmp_path, model_path):
    """The real llama-server (two slots, the small GGUF): a c=2 level split over two
    worker processes; token counts and engine truth come from the server in each."""
    from tests.support import real_servers as servers

    try:
        sp = servers.start_llama_server(model_path, tmp_path, ["-np", "2"])
    except servers.ServerStartError as e:
        servers.unavailable("llama-server", str(e))
    try:
        spec = EngineSpec("ls", "llama-server", url=sp.url)
        plan = BenchPlan(
            engines=["ls"], runs=2, warmup=0, concurrency=[2], prompt_tokens=32,
            max_tokens=8, workers=2,
        )  # fmt: skip
        res = await BenchRunner(plan, [spec]).run()
    finally:
        sp.stop()
    run = res.engines[0]
    assert run.error is None and not res.partial
    (level,) = run.levels
    assert level.complete and len(level.records) == 4 and all(r.ok for r in level.records)
    assert sorted(r.worker for r in level.records) == [1, 1, 2, 2]
    for r in level.records:
        m = r.metrics
        assert m.output_tokens == 8 and m.output_tokens_source == "usage"
        assert m.prompt_tokens is not None and m.prompt_tokens >= 30
        truth = r.timeline.truth  # the server's own timings came back from the worker
        assert truth is not None and truth.decode_ms is not None and truth.decode_ms > 0
    # the two processes' requests overlapped: both slots decoded at once
    w1 = [r for r in level.records if r.worker == 1]
    w2 = [r for r in level.records if r.worker == 2]
    assert min(r.t_start_s for r in w2) < max(r.t_end_s for r in w1)
    assert min(r.t_start_s for r in w1) < max(r.t_end_s for r in w2)


def test_cli_workers_hand_over_batches_bigger_than_a_pipe(
    infertop_cmd, cli_env, tmp_path, pace_server_url
):
    """The CLI bench, on the loop it really uses (uvloop where installed, which makes a
    watched pipe non-blocking): a fast server, so each 0.2 s batch of records is many
    times the pipe's 64 KiB buffer; every record arrives, from both workers."""
    import json
    import subprocess

    url = pace_server_url(burst=True)
    out = tmp_path / "o"
    p = subprocess.run(
        [*infertop_cmd, "bench", "--url", url, "--workers", "2", "--concurrency", "8"]
        + ["--runs", "24", "--warmup", "0", "--max-tokens", "256", "--out", str(out)],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    report = json.loads((out / "report.json").read_text())
    warm = [r for r in report["engines"][0]["records"] if r["phase"] == "warm"]
    assert len(warm) == 8 * 24 and all(r["status"] == "ok" for r in warm)
    assert sorted({r["worker"] for r in warm}) == [1, 2]
    assert all(r["metrics"]["output_tokens"] == 256 for r in warm)
