"""Client worker processes: a concurrency level's streams split across processes.

At high concurrency against a fast server one Python process becomes the bottleneck of
the measurement itself. With ``--workers N`` (N > 1) a concurrency level c of an HTTP
engine runs in N worker processes: worker w holds c // N streams in flight (the first
c % N one more), each sending ``runs`` requests back to back, on its own event loop,
where bytes are stamped as they arrive (kernel receive stamps for plain http://, as in
one process). A worker sends its ended requests' records back to the bench process in
batches, every :data:`SEND_EVERY_S` (and all that are left when its share ends), where
they join the level's records (progress, checkpoints and the report see one level): a
message per record cost the bench process a wake-up, a read and an unpickling each, on
the cores the workers need (benchmarks/client_workers.py measures it).

Why merging is valid: every stamp is ``time.perf_counter_ns()`` (or a kernel stamp
converted to it), which on Linux is CLOCK_MONOTONIC — one clock for the whole system,
not per process — and the bench's start ``t0_ns`` is passed to every worker, so all
records sit on one time axis (a level's wall time = first request sent in any process
→ last request ended in any process).

Workers start (spawn: a fresh interpreter), build and load their engine, then wait; the
level starts in all of them at once. Requests get distinct prompt numbers (each worker
a range). Ctrl-C reaches the bench process, which tells the workers to stop; workers
ignore SIGINT themselves. Calibration, warm-up, cold starts and Poisson levels stay in
the bench process.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from tui.core.trace_context import TraceMode

STREAMS_PER_WORKER = 32  # the default: one worker per this many concurrent streams
STOP_POLL_S = 0.05
SEND_EVERY_S = 0.2  # a worker sends its ended requests' records at most this often


def max_workers() -> int:
    """The most workers by default: cores − 1 (one core left to the rest), at least 1."""
    return max(1, (os.cpu_count() or 1) - 1)


def default_workers(max_concurrency: int) -> int:
    """One worker per :data:`STREAMS_PER_WORKER` concurrent streams, at most
    :func:`max_workers`."""
    return max(1, min(max_workers(), math.ceil(max_concurrency / STREAMS_PER_WORKER)))


def split_streams(c: int, n: int) -> list[int]:
    """c streams over at most n workers: c // n each, the first c % n one more (no empty
    worker)."""
    n = max(1, min(n, c))
    return [c // n + (1 if w < c % n else 0) for w in range(n)]


@dataclass
class WorkerJob:
    """What one worker runs: its share of one concurrency level."""

    worker: int  # 1-based; records carry it
    spec: Any  # EngineSpec
    engine_name: str
    level_label: str
    concurrency: int  # the level's c (its records say c)
    streams: int  # this worker's share of c
    runs: int
    first_index: int  # prompt numbers first_index, first_index + 1, ...
    t0_ns: int  # the bench's start, perf_counter_ns
    max_tokens: int
    temperature: float
    seed: int
    shape: Any  # PromptShape
    trace: TraceMode = "off"  # each request's trace context, as the bench's (driver.trace)


def worker_main(job: WorkerJob, conn: Any) -> None:
    """A worker process. To the bench process (``conn``): ("ready",), then ("records",
    [RequestRecord, ...]) as requests end, then ("done", complete, its CPU seconds, its
    engine's small calls); or ("error", message).
    From it:
    "go" (start the level), then "stop" (stop early) or nothing. Pipes only: a process
    that dies never leaves a shared lock or condition held."""
    import signal

    from tui.bench.run import event_loop

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the bench process decides
    try:
        event_loop.run(_work(job, conn))
    except Exception as e:  # noqa: BLE001 - reported to the bench process
        conn.send(("error", f"worker {job.worker}: {type(e).__name__}: {e}"))
    finally:
        conn.close()


async def _work(job: WorkerJob, conn: Any) -> None:
    import asyncio
    import threading
    import time

    from tui.bench.run.loads import RequestDriver, run_concurrency
    from tui.bench.run.records import LevelRun
    from tui.core.pauses import streaming
    from tui.engines.base import EngineError, GenerationRequest
    from tui.engines.registry import create_engine
    from tui.transport.reader_loop import HttpReader

    loop = asyncio.get_running_loop()
    with HttpReader.on_running_loop():
        engine = create_engine(job.spec)
        try:
            await engine.load()
        except EngineError as e:
            conn.send(("error", f"worker {job.worker}: {e}"))
            return
        stopped = threading.Event()

        batch: list[Any] = []
        sent_at = loop.time()

        def send_batch() -> None:
            nonlocal sent_at
            if batch:
                conn.send(("records", batch[:]))
                batch.clear()
            sent_at = loop.time()

        def on_record(record: Any) -> None:
            record.worker = job.worker
            batch.append(record)
            if loop.time() - sent_at >= SEND_EVERY_S:
                send_batch()

        driver = RequestDriver(engine, job.engine_name, job.t0_ns, stopped, on_record)
        driver._next_index = job.first_index
        driver.trace = job.trace

        def make(i: int) -> GenerationRequest:  # as BenchRunner._maker
            req = GenerationRequest.from_prompt(
                job.shape.text(i),
                max_tokens=job.max_tokens,
                temperature=job.temperature,
                cache_prompt=False,
                ignore_eos=True,
            )
            req.seed = job.seed + i
            return req

        go = loop.create_future()

        def start() -> None:
            if not go.done():
                go.set_result(None)

        def listen() -> None:  # a thread: what the bench process says
            try:
                while True:
                    word = conn.recv()
                    if word == "go":
                        loop.call_soon_threadsafe(start)
                    elif word == "stop":
                        break
            except (EOFError, OSError):
                pass  # the bench process is gone: stop too
            stopped.set()
            driver.cancel_all()
            try:
                loop.call_soon_threadsafe(start)
            except RuntimeError:
                pass  # the level is over and the loop closed

        threading.Thread(target=listen, name="infertop-worker-listen", daemon=True).start()
        conn.send(("ready",))
        await go
        level = LevelRun(job.engine_name, job.level_label, "concurrency", job.concurrency)
        try:
            with streaming():
                await run_concurrency(
                    driver, job.streams, job.runs, make, level, level_c=job.concurrency
                )
        finally:
            send_batch()
            await engine.close()
        calls = dict(getattr(engine, "calls", None) or {})
        conn.send(("done", level.complete, time.process_time(), calls))


async def run_level_in_workers(
    jobs: list[WorkerJob],
    records: list[Any],
    on_record: Any,
    stopped: Any,
    on_end: Any = None,
) -> bool:
    """Run ``jobs`` in one process each; every record is appended to ``records`` and
    passed to ``on_record`` (on this loop) as it arrives. ``stopped()``: the bench was
    asked to stop (polled). ``on_end(cpu_s, calls)``: a worker ended (its CPU seconds,
    its engine's small calls). Returns whether every worker completed its share; raises
    RuntimeError naming the first worker that could not run."""
    import asyncio

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[int, tuple[Any, ...]]] = asyncio.Queue()
    procs, conns = _start_workers(jobs, records, on_record, inbox)
    waiting_ready, running = set(range(len(jobs))), set(range(len(jobs)))
    complete = True
    error: str | None = None
    told_stop = False

    def tell(word: str) -> None:
        for w in running:
            try:
                conns[w].send(word)
            except (OSError, ValueError):
                pass  # that worker is gone; its end shows as "exit"

    try:
        while running:
            if stopped() and not told_stop:
                told_stop = True
                tell("stop")
            try:
                w, msg = await asyncio.wait_for(inbox.get(), STOP_POLL_S)
            except asyncio.TimeoutError:
                continue
            kind = msg[0]
            if kind == "ready":
                waiting_ready.discard(w)
                if not waiting_ready and not told_stop:
                    tell("go")  # every worker is loaded: the level starts in all at once
            elif kind == "done":
                complete = complete and bool(msg[1])
                if on_end is not None and len(msg) >= 4:
                    on_end(float(msg[2]), dict(msg[3]))
            elif kind == "error":
                error = error or msg[1]
                told_stop = True
                tell("stop")
            elif kind == "exit":
                running.discard(w)
                if w in waiting_ready and error is None:
                    error = f"worker {jobs[w].worker} exited before it was ready"
                    told_stop = True
                    tell("stop")
    finally:
        tell("stop")
        await _end_workers(loop, procs, conns)
    if error is not None:
        raise RuntimeError(error)
    return complete and not stopped()


def _start_workers(
    jobs: list[WorkerJob], records: list[Any], on_record: Any, inbox: Any
) -> tuple[list[Any], list[Any]]:
    """One process per job (spawned: the bench process has threads, so no fork), each
    read from this loop: records straight into ``records`` and ``on_record``, every
    other message into ``inbox`` as (worker index, message); ("exit",) when it is gone."""
    import asyncio
    import multiprocessing

    from tui.core.child_python import safe_spawn_environment

    ctx = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    procs, conns = [], []
    for w, job in enumerate(jobs):
        recv, send = ctx.Pipe()
        p = ctx.Process(target=worker_main, args=(job, send), name=f"infertop-bench-{job.worker}")
        p.daemon = True
        with safe_spawn_environment():  # its bootstrap must not import from the cwd
            p.start()
        send.close()
        procs.append(p)
        conns.append(recv)

        def readable(w: int = w, recv: Any = recv) -> None:
            try:
                msg = recv.recv()
            except (EOFError, OSError):
                loop.remove_reader(recv.fileno())
                msg = ("exit",)
            if msg[0] == "records":  # the bulk: taken here, not through the inbox
                records.extend(msg[1])
                for record in msg[1]:
                    on_record(record)
            else:
                inbox.put_nowait((w, msg))

        loop.add_reader(recv.fileno(), readable)
        # uvloop (libuv) makes a watched fd non-blocking; Connection.recv reads a whole
        # message and must block for its rest (a batch is bigger than the pipe's buffer)
        os.set_blocking(recv.fileno(), True)
    return procs, conns


async def _end_workers(loop: Any, procs: list[Any], conns: list[Any]) -> None:
    """Stop reading the workers' pipes and wait for each process (killed after 10 s)."""
    for recv in conns:
        try:
            loop.remove_reader(recv.fileno())
        except (OSError, ValueError):
            pass
        recv.close()
    for p in procs:
        await loop.run_in_executor(None, p.join, 10)
        if p.is_alive():
            p.kill()
            p.join(5)
