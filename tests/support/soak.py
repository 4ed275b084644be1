"""The load soak: many concurrent streams from infertop's own bench client, for a while.

Shared by ``benchmarks/soak.py`` (256 streams × 60 s, figures printed) and
``tests/bench/test_soak.py`` (a small one, asserted). What is soaked is our client: the
bench's :class:`~tui.bench.run.loads.RequestDriver` and :func:`~tui.bench.run.loads.run_concurrency`
driving the "openai" engine kind, in this process, under the bench's own GC and GIL rules
(:func:`~tui.core.pauses.streaming`, :func:`~tui.core.pauses.short_gil_switches`). The
server is the pace server (tests/support/pace_server.py) in its own process, with as many
slots as streams, so its memory and sockets are not ours.

What it measures:

- accounting: requests started (prompts made) vs records received, by status
  (ok / failed with its reason / cancelled); none may go missing;
- RSS of this process, sampled every ``sample_s``: after the warm-up vs at the end;
- open file descriptors (``/proc/self/fd``) before the engine is built and after it is
  closed (the process-wide HTTP reader thread is started first: it lives for the process);
- ITL error: each gap between two content chunks measured by the client vs the server's
  actual send gap of the same two tokens (GET /stamps, same clock), for the requests still
  sampled evenly over the run (every k-th request), compared after it;
- streams active at once: from the records' own [sent, end] intervals (at instants every
  ``sample_s``), the server's maximum of streams served at once, and the driver's count in
  flight.

Records are counted and dropped as they come (the bench keeps every record for its
report; a soak that did would measure its own hoarding, not a leak). The few numbers kept
per request (a histogram, counters, a bounded window) do not grow with the run.
"""

from __future__ import annotations

import array
import asyncio
import collections
import gc
import json
import os
import re
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_server import support_command, support_env

TOKEN = re.compile(r"tok(\d+) ")
HIST_BIN_US = 1  # ITL error histogram: 1-µs bins...
HIST_BINS = 20_000  # ...up to 20 ms, then one overflow bin


@dataclass
class SoakConfig:
    streams: int = 256
    duration_s: float = 60.0
    warmup_s: float | None = None  # None: a sixth of the duration
    interval_ms: float = 20.0  # the pace server's gap between tokens
    tokens: int = 50  # per request
    endpoint: str = "chat"
    sample_s: float = 0.25
    itl_requests: int = 1000  # about this many requests, spread over the run, for ITL

    @property
    def expected_requests(self) -> int:
        """About how many requests the run sends (each takes ~ (tokens + 1) intervals)."""
        return int(self.streams * self.duration_s / ((self.tokens + 1) * self.interval_ms / 1e3))

    @property
    def warmup(self) -> float:
        return self.duration_s / 6 if self.warmup_s is None else self.warmup_s


@dataclass
class SoakResult:
    config: SoakConfig
    started: int = 0
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    driver_error: str | None = None  # an exception that escaped the bench machinery
    in_flight_after: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    rss_start: int = 0
    rss_warm: int = 0
    rss_end: int = 0
    rss_max: int = 0
    rss_trace: list[tuple[float, int]] = field(default_factory=list)  # (s, bytes), ~12 points
    gc_garbage: int = 0  # unreachable objects the full collection after the run found
    fds_before: int = 0
    fds_after: int = 0
    fds_new: list[str] = field(default_factory=list)  # what the leaked ones point at
    itl_gaps: int = 0
    itl_requests: int = 0  # requests sampled for the ITL comparison
    itl_err_p50_ms: float | None = None
    itl_err_p99_ms: float | None = None
    itl_err_max_ms: float | None = None
    overlap_max: int = 0
    overlap_median: float = 0.0  # streams active at once, over the steady part of the run
    overlap_min: int = 0
    server_max_active: int = 0
    client_max_in_flight: int = 0
    server_requests: int = 0
    load_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_end: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def accounted(self) -> int:
        return self.ok + self.failed + self.cancelled

    @property
    def rss_growth_pct(self) -> float:
        return (self.rss_end - self.rss_warm) / self.rss_warm * 100.0 if self.rss_warm else 0.0

    def lines(self) -> list[str]:
        """The figures, for people."""
        c = self.config
        mb = 1024 * 1024
        reasons = "; ".join(f"{n}× {r}" for r, n in self.failures.most_common(5)) or "none"
        la = " ".join(f"{x:.2f}" for x in self.load_start)
        lb = " ".join(f"{x:.2f}" for x in self.load_end)
        p50 = "n/a" if self.itl_err_p50_ms is None else f"{self.itl_err_p50_ms:.3f}"
        p99 = "n/a" if self.itl_err_p99_ms is None else f"{self.itl_err_p99_ms:.3f}"
        mx = "n/a" if self.itl_err_max_ms is None else f"{self.itl_err_max_ms:.2f}"
        return [
            f"soak: {c.streams} streams × {c.duration_s:g} s, pace server {c.interval_ms:g} ms "
            f"× {c.tokens} tokens per request, endpoint {c.endpoint}; {self.wall_s:.1f} s wall",
            f"requests: started {self.started}, completed {self.ok}, failed {self.failed}, "
            f"cancelled {self.cancelled}; accounted {self.accounted} of {self.started}"
            + (f"; ESCAPED: {self.driver_error}" if self.driver_error else ""),
            f"failure reasons: {reasons}",
            f"tokens received: {self.tokens:,} ({self.tokens / max(self.wall_s, 1e-9):,.0f}/s)",
            f"streams active at once: records' intervals max {self.overlap_max}, median "
            f"{self.overlap_median:.0f}, min {self.overlap_min} (steady part); server max "
            f"{self.server_max_active}; driver max in flight {self.client_max_in_flight}",
            f"RSS: start {self.rss_start / mb:.1f} MiB, after warm-up ({c.warmup:.3g} s) "
            f"{self.rss_warm / mb:.1f} MiB, end {self.rss_end / mb:.1f} MiB, max "
            f"{self.rss_max / mb:.1f} MiB; growth after warm-up {self.rss_growth_pct:+.2f} % "
            "(goal < 10 %)",
            "RSS over the run (s: MiB): "
            + ", ".join(f"{t:.1f}: {r / mb:.1f}" for t, r in self.rss_trace),
            f"cyclic garbage the full collection after the run found: {self.gc_garbage} objects",
            f"file descriptors: {self.fds_before} before the engine, {self.fds_after} after "
            f"it closed" + (f" (new: {', '.join(self.fds_new)})" if self.fds_new else ""),
            f"ITL error vs the server's send gaps: |error| p50 {p50} ms (goal <= 0.2), "
            f"p99 {p99} ms, max {mx} ms, over {self.itl_gaps:,} gaps of "
            f"{self.itl_requests} requests sampled over the run",
            f"load average: {la} at the start, {lb} at the end ({os.cpu_count()} cores)",
        ]


def open_fds() -> dict[str, str]:
    """This process's open file descriptors: number -> what it points at."""
    out: dict[str, str] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return out


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PaceProcess:
    """The pace server in its own process (slots for every stream)."""

    def __init__(self, cfg: SoakConfig) -> None:
        cmd = support_command(
            "pace_server",
            "--port",
            "0",
            "--interval-ms",
            str(cfg.interval_ms),
            "--tokens",
            str(cfg.tokens),
            "--concurrency",
            str(cfg.streams),
            "--stamps-kept",
            str(cfg.expected_requests * 2 + 1000),
        )
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=support_env())
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "pace server on http://127.0.0.1:PORT (...)"
        if " on " not in line:
            self.proc.kill()
            raise RuntimeError(f"pace server did not start: {line!r}")
        self.url = line.split(" on ", 1)[1].split()[0]

    def get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            data = json.loads(r.read())
        assert isinstance(data, dict)
        return data

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class ItlCheck:
    """Client gaps vs the server's send gaps for a sample of the run's requests.

    Every ``every``-th request (by seed) keeps its content chunks' (stamp, token number)
    in arrays allocated up front, so sampling adds nothing to the memory the soak watches;
    they are compared with the server's send times once, after the run.
    """

    def __init__(self, capacity: int, tokens: int, every: int) -> None:
        self.capacity, self.tokens, self.every = capacity, tokens, every
        self.seeds = array.array("q", bytes(8 * capacity))
        self.count = array.array("q", bytes(8 * capacity))
        self.t_ns = array.array("q", bytes(8 * capacity * tokens))
        self.token = array.array("q", bytes(8 * capacity * tokens))
        self.kept = 0
        self.hist = [0] * (HIST_BINS + 1)
        self.n = 0
        self.max_us = 0.0

    def keep(self, seed: int, chunk_ns: list[int], chunk_text: list[str]) -> None:
        if seed % self.every or self.kept >= self.capacity:
            return
        slot, n = self.kept, 0
        base = slot * self.tokens
        for t, text in zip(chunk_ns, chunk_text, strict=True):
            m = TOKEN.search(text)
            if m is None or n >= self.tokens:
                continue
            self.t_ns[base + n], self.token[base + n] = t, int(m.group(1))
            n += 1
        self.seeds[slot], self.count[slot] = seed, n
        self.kept += 1

    def compare(self, stamps: dict[str, Any]) -> None:
        """Match the kept requests with the server's send times (GET /stamps), by seed."""
        by_seed = {seed: rid for rid, seed in stamps.get("seed", {}).items()}
        sent_ns = stamps.get("sent_ns", {})
        for slot in range(self.kept):
            rid = by_seed.get(self.seeds[slot])
            sent = sent_ns.get(rid) if rid is not None else None
            if not sent:
                continue
            base = slot * self.tokens
            for j in range(base + 1, base + self.count[slot]):
                ia, ib = self.token[j - 1], self.token[j]
                if ib >= len(sent):
                    continue
                gap = self.t_ns[j] - self.t_ns[j - 1]
                err_us = abs(gap - (sent[ib] - sent[ia])) / 1000.0
                self.hist[min(int(err_us / HIST_BIN_US), HIST_BINS)] += 1
                self.max_us = max(self.max_us, err_us)
                self.n += 1

    def percentile_ms(self, q: float) -> float | None:
        if not self.n:
            return None
        rank = q / 100.0 * self.n
        acc = 0
        for i, k in enumerate(self.hist):
            acc += k
            if acc >= rank:
                return (i + 0.5) * HIST_BIN_US / 1000.0
        return self.max_us / 1000.0


async def run_soak(cfg: SoakConfig) -> SoakResult:
    """Run the soak on the running event loop (see the module docstring)."""
    from tui.bench.run.loads import RequestDriver, run_concurrency
    from tui.bench.run.records import LevelRun, RequestRecord
    from tui.core.pauses import settle_heap, short_gil_switches, streaming
    from tui.engines.base import EngineSpec, GenerationRequest
    from tui.engines.registry import create_engine
    from tui.transport.reader_loop import HttpReader

    res = SoakResult(cfg, load_start=os.getloadavg())
    server = PaceProcess(cfg)
    try:
        HttpReader.shared()  # process-wide, lives as long as the process: in the baseline
        settle_heap()
        fds0 = open_fds()
        res.fds_before = len(fds0)
        res.rss_start = rss_bytes()
        spec = EngineSpec(
            name="soak", kind="openai", url=server.url, model="pace", endpoint=cfg.endpoint
        )
        engine = create_engine(spec)
        await engine.load()
        stop = threading.Event()
        every = max(1, cfg.expected_requests // cfg.itl_requests)
        itl = ItlCheck(capacity=cfg.itl_requests * 3 // 2, tokens=cfg.tokens, every=every)
        n_bins = int((cfg.duration_s + 30) / cfg.sample_s) + 2
        active_at = [0] * n_bins  # records covering instant k × sample_s
        level = LevelRun("soak", f"c={cfg.streams}", "concurrency", concurrency=cfg.streams)
        t0_ns = time.perf_counter_ns()

        def on_record(rec: RequestRecord) -> None:
            level.records.clear()  # counted, not kept (see the module docstring)
            if rec.status == "ok":
                res.ok += 1
            elif rec.status == "cancelled":
                res.cancelled += 1
            else:
                res.failed += 1
                res.failures[(rec.error or "no text and no error")[:160]] += 1
            tl = rec.timeline
            res.tokens += tl.usage_output_tokens or 0
            lo = max(0, int(rec.t_start_s / cfg.sample_s) + 1)
            hi = min(n_bins - 1, int(rec.t_end_s / cfg.sample_s))
            for k in range(lo, hi + 1):
                active_at[k] += 1
            if rec.ok:
                itl.keep(rec.index, tl.chunk_ns, tl.chunk_text)

        driver = RequestDriver(engine, "soak", t0_ns, stop, on_record)

        def make(i: int) -> GenerationRequest:
            res.started += 1
            return GenerationRequest.from_prompt(
                f"soak request {i}",
                max_tokens=cfg.tokens,
                temperature=0.0,
                seed=i,
                cache_prompt=False,
                ignore_eos=True,
            )

        loop = asyncio.get_running_loop()
        samples: list[tuple[float, int]] = []

        async def sample() -> None:
            t_start = loop.time()
            while not stop.is_set():
                await asyncio.sleep(cfg.sample_s)
                t = loop.time() - t_start
                samples.append((t, rss_bytes()))
                res.client_max_in_flight = max(res.client_max_in_flight, driver.in_flight)
                if t >= cfg.duration_s:
                    stop.set()  # no new requests; those in flight run to their end

        sampler = asyncio.create_task(sample())
        t_wall = time.monotonic()
        with short_gil_switches(), streaming():
            try:
                await run_concurrency(driver, cfg.streams, 1 << 40, make, level)
            except Exception as e:  # noqa: BLE001 - reported: a request no record tells of
                res.driver_error = f"{type(e).__name__}: {e}"
                stop.set()
        res.wall_s = time.monotonic() - t_wall
        await sampler
        res.rss_end = rss_bytes()
        gc.unfreeze()
        res.gc_garbage = gc.collect()  # full collections were deferred while it ran
        res.in_flight_after = driver.in_flight
        itl.compare(await asyncio.to_thread(server.get, "/stamps"))  # after rss_end
        stats = await asyncio.to_thread(server.get, "/stats")
        res.server_max_active, res.server_requests = stats["max_active"], stats["requests"]
        await engine.close()
        settle_heap()
        fds1 = open_fds()
        res.fds_after = len(fds1)
        res.fds_new = sorted(f"{fd} -> {fds1[fd]}" for fd in set(fds1) - set(fds0))
    finally:
        server.stop()
    warm = [r for t, r in samples if t >= cfg.warmup]
    res.rss_warm = warm[0] if warm else res.rss_start
    res.rss_max = max([r for _t, r in samples] + [res.rss_end])
    step = max(1, -(-len(samples) // 12))
    res.rss_trace = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    res.itl_gaps, res.itl_requests = itl.n, itl.kept
    res.itl_err_p50_ms, res.itl_err_p99_ms = itl.percentile_ms(50), itl.percentile_ms(99)
    res.itl_err_max_ms = itl.max_us / 1000.0 if itl.n else None
    lo, hi = int(cfg.warmup / cfg.sample_s) + 1, int(cfg.duration_s / cfg.sample_s) - 1
    steady = sorted(active_at[lo:hi]) or [0]
    res.overlap_max = max(active_at)
    res.overlap_min = steady[0]
    res.overlap_median = steady[len(steady) // 2]
    res.load_end = os.getloadavg()
    return res
