#!/usr/bin/env python3
"""A small mutation check: does the suite notice when the measuring code is wrong?

Each mutation below is a one-line change that a plausible bug would make (a ``>`` that
should be ``>=``, a sum that should be a mean, a rank off by one). For each, the working
tree (tracked and untracked files git does not ignore) is copied to a temporary folder,
the mutation is applied *there* (never to the working tree), and only the test files
that ought to notice are run. A mutation the tests fail on is **caught**; one they pass
on **survived**: a gap in the tests (or a change that does not matter, which the note
should then say).

    .venv/bin/python scripts/mutation_check.py                  # every mutation
    .venv/bin/python scripts/mutation_check.py -k prometheus    # names containing a word
    .venv/bin/python scripts/mutation_check.py --list
    .venv/bin/python scripts/mutation_check.py --tests-from main~3   # older tests, same code

``--tests-from REV`` runs today's mutations against the tests of a git revision (its
``tests/`` folder replaces the copy's): the "before" half of a before/after report. A
test file that revision does not have is left out. The unmutated tests run first (the
baseline): a failure there stops the check, since nothing could be learnt from it.

Exit status: 0 when every mutation was caught, 1 when any survived, 2 on a bad baseline
or a mutation whose text is no longer in its file (the list needs updating).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

METRICS_TESTS = ("tests/core/test_metrics.py", "tests/core/test_metrics_properties.py")
STATS_TESTS = ("tests/core/test_stats.py", "tests/bench/test_statistics.py")
AGGREGATE_TESTS = ("tests/bench/test_statistics.py", "tests/bench/test_reports.py")
SLO_TESTS = (*AGGREGATE_TESTS, "tests/bench/test_slo_attainment.py")  # tui/bench/stats/slo.py
PROM_TESTS = (
    "tests/http/test_prometheus.py",
    "tests/fuzz/test_fuzz_prometheus.py",
    "tests/fleet/test_model.py",
)
FLEET_TESTS = ("tests/fleet/test_model.py", "tests/fleet/test_direct.py")
PROMQL_TESTS = ("tests/fleet/test_model.py", "tests/fleet/test_prometheus.py")


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # relative to the repository root
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]
    why: str  # the bug it stands for


MUTATIONS: tuple[Mutation, ...] = (
    # --- tui/core -------------------------------------------------------------------
    Mutation(
        "metrics-itl-per-token",
        "tui/core/metrics.py",
        "itl_token.extend([_ms(g) / k] * k)",
        "itl_token.extend([_ms(g) * k] * k)",
        METRICS_TESTS,
        "a chunk of k tokens spreads its gap wrongly",
    ),
    Mutation(
        "metrics-tpot-denominator",
        "tui/core/metrics.py",
        "tpot = _ms(e2e_ns - ttft_ns) / (n_out - 1)",
        "tpot = _ms(e2e_ns - ttft_ns) / n_out",
        METRICS_TESTS,
        "TPOT divides by N instead of N - 1",
    ),
    Mutation(
        "metrics-decode-tokens",
        "tui/core/metrics.py",
        "decode_tps = (n_out - 1) / (span_ns / 1e9)",
        "decode_tps = n_out / (span_ns / 1e9)",
        METRICS_TESTS,
        "decode tok/s counts the first token, which is TTFT's",
    ),
    Mutation(
        "metrics-prefill-estimate-units",
        "tui/core/metrics.py",
        "m.prefill_tps = m.prompt_tokens / (m.ttft_ms / 1000.0)",
        "m.prefill_tps = m.prompt_tokens / m.ttft_ms",
        METRICS_TESTS,
        "estimated prefill tok/s per ms, not per second",
    ),
    Mutation(
        "metrics-engine-difference-sign",
        "tui/core/metrics.py",
        "m.ttft_minus_engine_prefill_ms = m.ttft_ms - truth.prompt_ms",
        "m.ttft_minus_engine_prefill_ms = truth.prompt_ms - m.ttft_ms",
        METRICS_TESTS,
        "client − engine difference with the wrong sign",
    ),
    Mutation(
        "timeline-empty-chunk-is-content",
        "tui/core/timeline.py",
        "keep = [i for i, x in enumerate(texts) if x]",
        "keep = [i for i, x in enumerate(texts) if x is not None]",
        METRICS_TESTS,
        "a role-only (empty) chunk counts as the first token",
    ),
    Mutation(
        "metrics-zero-token-chunks-kept",
        "tui/core/metrics.py",
        "keep = [i for i, k in enumerate(tokens) if k != 0]",
        "keep = [i for i, k in enumerate(tokens) if k is not None]",
        METRICS_TESTS,
        "a chunk of text without a token counts as a token's arrival",
    ),
    Mutation(
        "stats-percentile-rank",
        "tui/core/stats.py",
        "r = (len(xs) - 1) * q / 100.0",
        "r = len(xs) * q / 100.0",
        STATS_TESTS,
        "percentile rank off by one",
    ),
    Mutation(
        "energy-trapezoid",
        "tui/core/energy.py",
        "total += (p_lo + p_hi) / 2.0 * (hi - lo)",
        "total += p_lo * (hi - lo)",
        ("tests/core/test_energy.py",),
        "power integrated as steps, not trapezoids",
    ),
    Mutation(
        "energy-counter-wrap",
        "tui/core/energy.py",
        "step += wrap_j",
        "step = wrap_j",
        ("tests/core/test_energy.py",),
        "a wrapped energy counter loses what it counted before the wrap",
    ),
    Mutation(
        "energy-bracket-start",
        "tui/core/energy.py",
        "before = [i for i, p in enumerate(pts) if p.t <= t0]",
        "before = [i for i, p in enumerate(pts) if p.t < t0]",
        ("tests/core/test_energy.py",),
        "a reading exactly at the window's start is not used",
    ),
    # --- tui/bench/stats/aggregate.py -------------------------------------------------
    Mutation(
        "aggregate-slo-at-limit",
        "tui/bench/stats/slo.py",
        "return v is not None and v <= limit",
        "return v is not None and v < limit",
        SLO_TESTS,
        "a request exactly at an SLO limit fails it",
    ),
    Mutation(
        "aggregate-slo-missing-metric",
        "tui/bench/stats/slo.py",
        "return v is not None and v <= limit",
        "return v is None or v <= limit",
        SLO_TESTS,
        "a request without the metric (no token) meets the SLO",
    ),
    Mutation(
        "aggregate-eta-inverted",
        "tui/bench/stats/aggregate.py",
        "eta = total_tps / single_tps if",
        "eta = single_tps / total_tps if",
        AGGREGATE_TESTS,
        "scaling efficiency upside down",
    ),
    Mutation(
        "aggregate-goodput-fraction-of-ok",
        "tui/bench/stats/slo.py",
        '"attainment": len(good) / n if n else None,',
        '"attainment": len(good) / max(1, n - sum(1 for r in judged if not r.ok)),',
        SLO_TESTS,
        "goodput's fraction leaves failed requests out of the whole",
    ),
    Mutation(
        "aggregate-short-outputs",
        "tui/bench/stats/aggregate.py",
        "(r.metrics.output_tokens or 0) < (r.max_tokens or max_tokens)",
        "(r.metrics.output_tokens or 0) <= (r.max_tokens or max_tokens)",
        AGGREGATE_TESTS,
        "a full-length answer counted as short",
    ),
    # --- tui/transport/prometheus.py --------------------------------------------------
    Mutation(
        "prometheus-idle-counter-delta",
        "tui/transport/prometheus.py",
        "if va is None or vb is None or vb < va:\n        return None\n    return vb - va",
        "if va is None or vb is None or vb <= va:\n        return None\n    return vb - va",
        PROM_TESTS,
        "an unchanged counter is unknown instead of 0 (prefix hits show – not 0 %)",
    ),
    Mutation(
        "prometheus-idle-counter-rate",
        "tui/transport/prometheus.py",
        "if va is None or vb is None or dt <= 0 or vb < va:",
        "if va is None or vb is None or dt <= 0 or vb <= va:",
        PROM_TESTS,
        "an idle window has no rate instead of 0 tok/s",
    ),
    Mutation(
        "prometheus-quantile-no-interpolation",
        "tui/transport/prometheus.py",
        "return lower + (upper - lower) * (rank - prev) / (cum - prev)",
        "return upper",
        PROM_TESTS,
        "a quantile is its bucket's upper bound, not interpolated",
    ),
    Mutation(
        "prometheus-quantile-rank-edge",
        "tui/transport/prometheus.py",
        "if cum >= rank and cum > prev:",
        "if cum > rank and cum > prev:",
        PROM_TESTS,
        "a rank exactly at a bucket's count goes to the next bucket",
    ),
    Mutation(
        "prometheus-restart-by-count",
        "tui/transport/prometheus.py",
        "if any(d < 0 for _, d in deltas) or count_b < count_a:",
        "if any(d < 0 for _, d in deltas):",
        PROM_TESTS,
        "a restart seen only in _count gives a negative window",
    ),
    Mutation(
        "prometheus-buckets-not-summed",
        "tui/transport/prometheus.py",
        "out[le] = out.get(le, 0.0) + v",
        "out[le] = v",
        PROM_TESTS,
        "a histogram's label sets (vLLM's engines) are not added up",
    ),
    Mutation(
        "prometheus-match-any-label",
        "tui/transport/prometheus.py",
        "return all(d.get(k) == v for k, v in match.items())",
        "return any(d.get(k) == v for k, v in match.items()) or not match",
        PROM_TESTS,
        "a label filter matches on any one label",
    ),
    # --- tui/fleet --------------------------------------------------------------------
    Mutation(
        "fleet-direct-kv-summed",
        "tui/fleet/direct.py",
        "row.kv_cache_pct = 100.0 * sum(values) / len(values)",
        "row.kv_cache_pct = 100.0 * sum(values)",
        FLEET_TESTS,
        "KV % of a data-parallel vLLM summed over engines",
    ),
    Mutation(
        "fleet-direct-running-one-engine",
        "tui/fleet/direct.py",
        'row.running = cur.total("vllm:num_requests_running")',
        'row.running = max(cur.samples.get("vllm:num_requests_running", {}).values())',
        FLEET_TESTS,
        "requests running: one engine's, not all engines'",
    ),
    Mutation(
        "fleet-direct-llama-prefix-whole",
        "tui/fleet/direct.py",
        "row.prefix_cache_hit_pct = _ratio_pct(cached, cached + fresh)",
        "row.prefix_cache_hit_pct = _ratio_pct(cached, fresh)",
        FLEET_TESTS,
        "llama-server's hit % over fresh tokens only (it excludes cached ones)",
    ),
    Mutation(
        "fleet-direct-itl-no-tokens",
        "tui/fleet/direct.py",
        "if tokens and seconds is not None:",
        "if tokens is not None and seconds is not None:",
        FLEET_TESTS,
        "an idle llama-server window divides by zero tokens",
    ),
    Mutation(
        "fleet-promql-kv-summed",
        "tui/fleet/promql.py",
        '"kv": f"avg by ({BY}) (vllm:kv_cache_usage_perc)',
        '"kv": f"sum by ({BY}) (vllm:kv_cache_usage_perc)',
        PROMQL_TESTS,
        "KV % of a data-parallel vLLM summed by PromQL",
    ),
    Mutation(
        "fleet-promql-gen-averaged",
        "tui/fleet/promql.py",
        '"gen_tps": f"sum by ({BY}) (rate(vllm:generation_tokens_total',
        '"gen_tps": f"avg by ({BY}) (rate(vllm:generation_tokens_total',
        PROMQL_TESTS,
        "tok/s of a data-parallel vLLM averaged over engines",
    ),
    Mutation(
        "fleet-promql-running-max",
        "tui/fleet/promql.py",
        '"running": f"sum by ({BY}) (vllm:num_requests_running)"',
        '"running": f"max by ({BY}) (vllm:num_requests_running)"',
        PROMQL_TESTS,
        "requests running: the busiest engine's, not all engines'",
    ),
    Mutation(
        "fleet-promql-prefix-fraction",
        "tui/fleet/promql.py",
        "row.prefix_cache_hit_pct = None if prefix is None else 100.0 * prefix",
        "row.prefix_cache_hit_pct = prefix",
        PROMQL_TESTS,
        "prefix hits shown as a fraction, not a percentage",
    ),
    Mutation(
        "fleet-promql-host-short-name",
        "tui/fleet/promql.py",
        'short = host.split(".", 1)[0]',
        'short = host.split(".", 1)[-1]',
        PROMQL_TESTS,
        "gpu7.example.com matched as example.com, not gpu7",
    ),
    Mutation(
        "fleet-rows-gpu-util-summed",
        "tui/fleet/rows.py",
        "vals = [g.util_pct for g in self.gpus or [] if g.util_pct is not None]\n"
        "        return sum(vals) / len(vals) if vals else None",
        "vals = [g.util_pct for g in self.gpus or [] if g.util_pct is not None]\n"
        "        return sum(vals) if vals else None",
        FLEET_TESTS,
        "GPU % of a host summed over its GPUs",
    ),
    Mutation(
        "fleet-rows-j-per-token-rate",
        "tui/fleet/rows.py",
        "return energy / (tps * w)",
        "return energy / tps",
        FLEET_TESTS + PROMQL_TESTS[1:],
        "J/token divides by a rate, not by the window's tokens",
    ),
    # --- a few more: the server panel, the SSE reader, the sampler ---------------------
    Mutation(
        "vllm-panel-kv-summed",
        "tui/telemetry/servers/vllm_metrics.py",
        "kv_cache_usage=_mean(cur, kv_name) if kv_name else None,",
        "kv_cache_usage=cur.total(kv_name) if kv_name else None,",
        ("tests/fleet/test_model.py", "tests/http/test_prometheus.py"),
        "the server panel's KV % summed over a data-parallel vLLM's engines",
    ),
    Mutation(
        "sse-fast-path-newline",
        "tui/transport/sse.py",
        'and data.find(b"\\n") == len(data) - 2\n',
        "",
        ("tests/http/test_sse.py", "tests/fuzz/test_fuzz_sse.py"),
        "the SSE fast path takes a multi-line event for one whole event",
    ),
    Mutation(
        "sampler-bursts-after-a-stall",
        "tui/telemetry/sampler.py",
        "if time.monotonic() > next_t + self.interval_s:",
        "if False:",
        ("tests/telemetry/test_hardware.py",),
        "after a stall the sampler fires every missed tick at once",
    ),
    Mutation(
        "bench-level-runs-one-at-a-time",
        "tui/bench/run/loads.py",
        "await asyncio.gather(*(worker() for _ in range(c)))",
        "for _ in range(c):\n        await worker()",
        ("tests/bench/test_runner_pace.py",),
        "a concurrency level's c workers run one after another",
    ),
    Mutation(
        "bench-poisson-arrivals-doubled",
        "tui/bench/run/arrivals.py",
        "return rng.expovariate(spec.rate)",
        "return 2 * rng.expovariate(spec.rate)",
        ("tests/bench/test_arrivals.py", "tests/bench/test_runner_pace.py"),
        "Poisson arrivals at half the rate asked for",
    ),
    Mutation(
        "handoff-rests-on-a-slow-stream",
        "tui/transport/handoff.py",
        "fast, last = now - last < FAST_GAP_S, now",
        "fast, last = True, now",
        ("tests/engines/test_handoff.py",),
        "the consumer rests after every batch, slow streams too",
    ),
    Mutation(
        "proxy-series-born-at-the-end",
        "tui/proxy/book.py",
        "        self.metrics.generation_started(rec.model, rec.path)\n",
        "",
        ("tests/proxy/test_outputs.py",),
        "the proxy's series appear with a first request's end: rate() loses that request",
    ),
)


def tree_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def snapshot(dest: Path, tests_from: str | None) -> None:
    """The working tree as it is now (later edits do not leak into a run), with
    ``tests_from``'s tests/ in place of its own when given."""
    for rel in tree_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    if tests_from is not None:
        shutil.rmtree(dest / "tests")
        archive = subprocess.run(
            ["git", "archive", tests_from, "tests"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def apply(dest: Path, m: Mutation) -> str | None:
    """Apply ``m`` inside ``dest``; the reason when its text is not there exactly once."""
    path = dest / m.path
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        return f"{m.path}: the text to mutate occurs {n} times (expected once)"
    path.write_text(text.replace(m.old, m.new))
    return None


@dataclass
class Outcome:
    name: str
    verdict: str  # caught | SURVIVED | stale | error
    detail: str
    seconds: float


def run_tests(
    dest: Path, tests: tuple[str, ...], timeout_s: float, verbose: bool = False
) -> tuple[int, str]:
    present = [t for t in tests if (dest / t).is_file()]
    if not present:
        return 5, "none of its test files exist"
    env = dict(os.environ, PYTHONPATH=str(dest), PYTHONDONTWRITEBYTECODE="1")
    env.pop("INFERTOP_REQUIRE_SERVERS", None)  # a missing server must not pass for a catch
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *present]
    try:
        p = subprocess.run(
            cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:.0f} s"
    lines = [x for x in (p.stdout + p.stderr).splitlines() if x.strip()]
    if p.returncode not in (0, 1) or (verbose and p.returncode != 0):
        print("\n".join(lines[-40:]), file=sys.stderr)
    return p.returncode, lines[-1] if lines else ""


def check(m: Mutation, pristine: Path, timeout_s: float) -> Outcome:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mutation-{m.name}-") as tmp:
        dest = Path(tmp) / "tree"
        shutil.copytree(pristine, dest, symlinks=True)
        stale = apply(dest, m)
        if stale is not None:
            return Outcome(m.name, "stale", stale, time.monotonic() - t0)
        rc, last = run_tests(dest, m.tests, timeout_s)
    took = time.monotonic() - t0
    if rc == 0:
        return Outcome(m.name, "SURVIVED", last, took)
    if rc == 1:
        return Outcome(m.name, "caught", last, took)
    return Outcome(m.name, "error", f"pytest exit {rc}: {last}", took)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="word", help="only mutations whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--tests-from", metavar="REV", help="use this git revision's tests/")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="mutations run at once")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per test run")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.word or args.word in m.name]
    if args.list:
        for m in chosen:
            print(f"{m.name:38} {m.path:32} {m.why}")
        return 0
    if not chosen:
        print(f"no mutation's name contains {args.word!r} (--list lists them)", file=sys.stderr)
        return 2
    tests = sorted({t for m in chosen for t in m.tests})
    with tempfile.TemporaryDirectory(prefix="mutation-pristine-") as tmp:
        pristine = Path(tmp) / "tree"
        snapshot(pristine, args.tests_from)
        with tempfile.TemporaryDirectory(prefix="mutation-baseline-") as base:
            shutil.copytree(pristine, Path(base) / "tree", symlinks=True)
            rc, last = run_tests(Path(base) / "tree", tuple(tests), args.timeout, verbose=True)
        if rc != 0:
            print(f"baseline (no mutation) did not pass: {last}", file=sys.stderr)
            return 2
        where = f"tests from {args.tests_from}" if args.tests_from else "the working tree's"
        print(f"baseline: {last} ({where} tests)", flush=True)
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            outcomes = []
            for o in pool.map(lambda m: check(m, pristine, args.timeout), chosen):
                print(f"  {o.verdict:9} {o.name:38} {o.seconds:5.0f} s  {o.detail}", flush=True)
                outcomes.append(o)
    by = {v: [o.name for o in outcomes if o.verdict == v] for v in ("caught", "SURVIVED")}
    bad = [o for o in outcomes if o.verdict in ("stale", "error")]
    print(
        f"\n{len(outcomes)} mutations: {len(by['caught'])} caught, "
        f"{len(by['SURVIVED'])} survived, {len(bad)} stale or errors"
    )
    for name in by["SURVIVED"]:
        m = next(x for x in MUTATIONS if x.name == name)
        print(f"  survived: {name} ({m.path}): {m.why}")
    if bad:
        return 2
    return 1 if by["SURVIVED"] else 0


if __name__ == "__main__":
    sys.exit(main())
