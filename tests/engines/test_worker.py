"""In-process engines in a worker process: a native crash ends the stream, not infertop.

The worker really dies here: the tests send it SIGKILL and SIGSEGV in the middle of a
stream (the real llama.cpp engine on the embedded model, and the synthetic engine where
only the process plumbing is under test).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tui.core.events import Failed, Finished, RequestSent, TextChunk
from tui.core.metrics import compute_metrics
from tui.core.timeline import RequestTimeline
from tui.engines.base import CancelToken, EngineError, EngineSpec, GenerationRequest
from tui.engines.inprocess.worker import WorkerEngine
from tui.engines.inprocess.worker_process import describe_exit
from tui.engines.registry import create_engine, runs_in_worker

ROOT = Path(__file__).resolve().parents[2]


def synthetic(**options):  # type: ignore[no-untyped-def]
    spec = EngineSpec(name="s", kind="synthetic", options={"isolate": True, **options})
    return create_engine(spec)


async def stream_until(engine, n_chunks, action, max_tokens=400, cancel=None):  # type: ignore[no-untyped-def]
    """Stream; after ``n_chunks`` content chunks call ``action()``; return the timeline,
    the events, and perf_counter_ns() at each event's arrival here."""
    tl = RequestTimeline()
    events, seen = [], []
    request = GenerationRequest.from_prompt("Tell me about the sea.", max_tokens=max_tokens)
    chunks = 0
    async for event in engine.stream(request, cancel):
        seen.append(time.perf_counter_ns())
        tl.add(event)
        events.append(event)
        if isinstance(event, TextChunk) and event.text:
            chunks += 1
            if chunks == n_chunks and action is not None:
                action()
    return tl, events, seen


def test_in_process_kinds_run_in_a_worker_by_default() -> None:
    assert runs_in_worker(EngineSpec(name="a", kind="llamacpp"))
    assert runs_in_worker(EngineSpec(name="a", kind="vllm-inprocess", model="m"))
    assert not runs_in_worker(EngineSpec(name="a", kind="synthetic"))
    assert not runs_in_worker(EngineSpec(name="a", kind="llamacpp", options={"isolate": False}))
    assert not runs_in_worker(EngineSpec(name="a", kind="openai", url="http://x"))
    engine = create_engine(EngineSpec(name="a", kind="llamacpp"))
    assert isinstance(engine, WorkerEngine) and engine.kind == "llamacpp"
    with pytest.raises(EngineError, match="isolate"):
        runs_in_worker(EngineSpec(name="a", kind="llamacpp", options={"isolate": "yes"}))


def test_perf_counter_is_one_clock_across_processes() -> None:
    """The worker's stamps are comparable with ours: a child's perf_counter_ns reading
    falls between our readings before it started and after it answered."""
    for _ in range(5):
        before = time.perf_counter_ns()
        out = subprocess.run(
            [sys.executable, "-c", "import time; print(time.perf_counter_ns())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        after = time.perf_counter_ns()
        child = int(out)
        assert before < child < after
    info = time.get_clock_info("perf_counter")
    assert info.monotonic
    if sys.platform.startswith("linux"):
        assert info.implementation == "clock_gettime(CLOCK_MONOTONIC)"


async def test_stream_through_a_worker_is_stamped_there() -> None:
    engine = synthetic(tokens_per_s=400, ttft_ms=5)
    await engine.load()
    try:
        assert engine.pid is not None and engine.pid != os.getpid()
        assert engine.info().pid == engine.pid  # the hardware panel's RSS is the worker's
        tl, events, seen = await stream_until(engine, 0, None, max_tokens=40)
        assert isinstance(events[0], RequestSent) and isinstance(events[-1], Finished)
        assert sum(isinstance(e, RequestSent) for e in events) == 1  # the worker's is dropped
        m = compute_metrics(tl)
        assert m.output_tokens == 40 and m.error is None
        # stamped in the worker before we saw it, after we sent the request
        for event, t_seen in zip(events[1:], seen[1:], strict=True):
            assert events[0].t_ns < event.t_ns <= t_seen
    finally:
        await engine.close()
    assert engine.pid is None


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
async def test_worker_killed_mid_stream_ends_it_with_failed(sig: signal.Signals) -> None:
    engine = synthetic(tokens_per_s=300, ttft_ms=5)
    await engine.load()
    pid = engine.pid
    assert pid is not None
    try:
        tl, events, _ = await stream_until(engine, 10, lambda: os.kill(pid, sig))
        assert isinstance(events[-1], Failed)
        assert f"engine process died: {sig.name}" in events[-1].message
        m = compute_metrics(tl)
        assert m.error and sig.name in m.error
        assert 10 <= m.output_tokens < 400  # the partial answer and its count are kept
        assert tl.text.strip()
        assert engine.died and not engine.loaded
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
        # the next request is refused at once, saying why and what to do
        tl2, events2, _ = await stream_until(engine, 0, None, max_tokens=5)
        assert isinstance(events2[-1], Failed) and "reload" in events2[-1].message
        # and a reload starts a fresh worker that answers
        await engine.load()
        assert engine.pid not in (None, pid)
        tl3, events3, _ = await stream_until(engine, 0, None, max_tokens=5)
        assert isinstance(events3[-1], Finished) and compute_metrics(tl3).output_tokens == 5
    finally:
        await engine.close()


async def test_restart_right_after_close_is_not_failed_by_the_old_worker() -> None:
    """A cold start is close() then load(): the old worker's end must not fail the new
    worker's load or streams (the bench's cold runs do this back to back)."""
    engine = synthetic(tokens_per_s=1000, ttft_ms=1)
    await engine.load()
    try:
        pids = set()
        for _ in range(8):
            await engine.close()
            await engine.load()
            pids.add(engine.pid)
            tl, events, _ = await stream_until(engine, 0, None, max_tokens=3)
            assert isinstance(events[-1], Finished), events[-1]
        assert len(pids) == 8
    finally:
        await engine.close()


async def test_cancel_reaches_the_worker() -> None:
    engine = synthetic(tokens_per_s=200, ttft_ms=5)
    await engine.load()
    try:
        token = CancelToken()
        tl, events, _ = await stream_until(engine, 5, token.cancel, max_tokens=1000, cancel=token)
        assert isinstance(events[-1], Finished) and events[-1].reason == "cancelled"
        assert compute_metrics(tl).output_tokens < 20
    finally:
        await engine.close()


async def test_a_load_failure_is_one_line_and_leaves_no_process() -> None:
    engine = synthetic(fail_load="no such model here")
    before = {p.pid for p in psutil.Process().children()}
    with pytest.raises(EngineError, match="no such model here"):
        await engine.load()
    assert engine.pid is None
    await asyncio.sleep(0.1)
    assert {p.pid for p in psutil.Process().children()} <= before


def test_the_worker_ends_when_infertop_dies(tmp_path: Path) -> None:
    """SIGKILL to the parent: the worker sees its socket close and exits (no orphan)."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, sys
            from tui.engines.base import EngineSpec
            from tui.engines.registry import create_engine

            async def main():
                spec = EngineSpec(name="s", kind="synthetic", options={"isolate": True})
                engine = create_engine(spec)
                await engine.load()
                print(engine.pid, flush=True)
                await asyncio.sleep(60)

            asyncio.run(main())
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        assert parent.stdout is not None
        worker_pid = int(parent.stdout.readline())
        assert psutil.pid_exists(worker_pid)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while psutil.pid_exists(worker_pid) and time.monotonic() < deadline:
            try:
                if psutil.Process(worker_pid).status() == "zombie":
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        alive = psutil.pid_exists(worker_pid) and psutil.Process(worker_pid).status() != "zombie"
        assert not alive, "the worker outlived infertop"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_describe_exit_names_the_signal_and_what_to_do() -> None:
    assert describe_exit(-signal.SIGSEGV) == "engine process died: SIGSEGV (Segmentation fault)"
    ill = describe_exit(-signal.SIGILL, "ggml: tilezero")
    assert ill.startswith("engine process died: SIGILL (Illegal instruction)")
    assert "infertop doctor" in ill and ill.endswith("last words: ggml: tilezero")
    assert describe_exit(3) == "engine process exited with status 3"


# --- the real thing: llama.cpp on the embedded model, in its worker ----------------------


@pytest.mark.engine
@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
async def test_llamacpp_worker_crash_mid_answer_keeps_the_partial_answer(
    sig: signal.Signals, model_path: Path
) -> None:
    engine = create_engine(EngineSpec(name="local", kind="llamacpp", model="default", n_threads=2))
    assert isinstance(engine, WorkerEngine)
    await engine.load()
    pid = engine.pid
    assert pid is not None
    assert psutil.Process(pid).memory_info().rss > 50_000_000  # the model is in the worker
    try:
        tl, events, seen = await stream_until(engine, 8, lambda: os.kill(pid, sig))
        assert isinstance(events[-1], Failed) and sig.name in events[-1].message
        m = compute_metrics(tl)
        assert m.ttft_ms is not None and m.ttft_ms > 0
        assert m.output_tokens is not None and m.output_tokens >= 8
        assert m.output_tokens_source == "engine-chunks"  # token ids counted by llama.cpp
        assert tl.stamp_source == (
            "llama.cpp's generation thread, as each token id is returned "
            "(in infertop's engine worker process)"
        )
        assert len(tl.text) > 8
        # tokens were stamped in the worker: after our RequestSent, before we saw them
        sent = events[0]
        for event, t_seen in zip(events[1:-1], seen[1:-1], strict=True):
            assert sent.t_ns < event.t_ns <= t_seen
    finally:
        await engine.close()
