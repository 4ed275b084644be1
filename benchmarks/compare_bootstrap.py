"""How long `infertop compare` takes on a big report, vectorised vs the plain definitions.

Builds one level of --requests requests from a real report's requests (its decode tok/s,
TTFT, token counts and durations, cycled; each request given --gaps per-token ITL values
drawn around its own median gap, seeded), then times, in one run:

- vectorised: tui.bench.compare.boot.resampled_statistics for --resamples resamples;
- plain: the same resamples (the same indices) with the plain statistics of
  tui.bench.compare.ratios (pooled lists sorted per resample), on the first --plain resamples
  only, scaled up to --resamples.

Prints both, their ratio, and checks that the two give the same values on the resamples
both computed (so the workload really was the same). Goal: a 500 × 255 level compared
in a few seconds (2000 resamples per side).

    .venv/bin/python -m benchmarks.compare_bootstrap [--report DIR] [--requests 500]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks import smoke
from tui.bench.compare.boot import resampled_statistics
from tui.bench.compare.ratios import METRICS, statistic
from tui.bench.compare.samples import RequestSample, level_samples
from tui.bench.report.files import load_report

DEFAULT_REPORT = Path(__file__).resolve().parents[1] / "tests" / "app" / "compare_reports" / "b"


class RecordingRng:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.rows: list[np.ndarray] = []

    def integers(self, low: int, high: int, size: tuple[int, int]) -> np.ndarray:
        idx = self.rng.integers(low, high, size=size)
        self.rows.extend(idx)
        return idx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", type=Path, default=DEFAULT_REPORT)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--gaps", type=int, default=255)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--plain", type=int, default=40, help="resamples timed the plain way")
    smoke.add_flag(ap)
    args = ap.parse_args()
    if args.smoke:
        args.requests, args.gaps, args.resamples, args.plain = 40, 16, 50, 5

    levels = level_samples(load_report(args.report))
    level = next(iter(levels.values()))
    rng = random.Random(0)
    reqs = []
    for i in range(args.requests):
        r = level.requests[i % len(level.requests)]
        mid = statistics.median(r.itl_token_ms) if r.itl_token_ms else 10.0
        gaps = tuple(sorted(rng.lognormvariate(0, 0.3) * mid for _ in range(args.gaps)))
        reqs.append(RequestSample(r.decode_tps, r.ttft_ms, gaps, r.output_tokens, r.duration_s))
    level.requests = reqs

    recording = RecordingRng(0)
    t0 = time.perf_counter()
    got = resampled_statistics(level, args.resamples, recording)
    vectorised_s = time.perf_counter() - t0
    assert len(recording.rows) == args.resamples

    t0 = time.perf_counter()
    plain = {m: [] for m in METRICS}
    for row in recording.rows[: args.plain]:
        sample = [reqs[i] for i in row]
        for m in METRICS:
            plain[m].append(statistic(m, level)(sample))
    plain_s = (time.perf_counter() - t0) * args.resamples / args.plain

    for m in METRICS:
        for x, y in zip(got[m][: args.plain], plain[m], strict=True):
            assert y is not None and abs(x - y) <= 1e-9 * abs(y), (m, x, y)
    pooled = sum(len(r.itl_token_ms) for r in reqs)
    print(
        f"level: {args.requests} requests, {pooled} pooled ITL values; {args.resamples} resamples"
    )
    print(f"vectorised: {vectorised_s:.2f} s   plain (scaled from {args.plain}): {plain_s:.1f} s")
    print(f"plain ÷ vectorised: {plain_s / vectorised_s:.0f}×  (values agree on {args.plain})")
    if args.smoke:  # the asserts above: every resample drawn, both ways agree
        smoke.check(pooled == args.requests * args.gaps, f"{pooled} pooled ITL values")
        smoke.passed(f"{args.resamples} resamples of {args.requests} requests, both ways agree")


if __name__ == "__main__":
    main()
