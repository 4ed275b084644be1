"""From measured requests to the numbers a report shows.

Definitions (per engine, per load level; only requests with status "ok" enter a
statistic, failed ones are counted and listed, cancelled ones are counted):

- wall time = first request sent → last request ended, over the level's requests; at
  c = 1, when the engine was scraped between requests for per-request truth, less the
  time between requests (``paused_s``: the bench's own, tui/bench/level_truth.py).
- total output tok/s = Σ output tokens of ok requests / wall time.
- per-request tok/s = each request's decode tok/s (see tui.core.metrics); median.
- single-request tok/s = the total output tok/s of the same engine's c=1 level.
- η (scaling efficiency) = total output tok/s ÷ single-request tok/s. Perfect parallel
  scaling at concurrency c gives η = c; ``eta_per_slot`` = η / c gives 1.0.
- TTFT / TTFO / ITL / TPOT / e2e: p50, p90, p95, p99 over the level (ITL pooled per
  token: each request's per-gap values weighted by the tokens they stand for, never
  expanded; tui.core.metrics). TTFO (first answer token or tool call) equals TTFT for a
  request that streamed no reasoning.
- medians with percentile-bootstrap 95 % intervals over requests (ITL: each request's
  median per-token ITL, since the gaps of one request are not independent samples).
- reasoning (thinking time, reasoning and answer tokens and tok/s): only for a level where
  some request reasoned (tui.bench.stats.reasoning).
- SLO attainment and goodput: tui.bench.stats.slo (its module docstring is the definition).
- open-loop levels: the arrival process asked and what was sent (tui.bench.stats.arrivals).
- comparisons: for each engine after the first, ratio of medians to the first engine's
  at the headline level, with a bootstrap interval of the ratio (TTFO's too where either
  of the two levels reasoned; otherwise it would repeat TTFT's).
- depth: per --depth level, medians and ratios to depth 0 (tui.bench.report.depth).
- batching: α of T_total(N) = N·T_single / (1 + α·N) over the concurrency levels, with
  its bootstrap interval and residuals per level (tui.bench.stats.batching).
- energy: per level, J/token over the level's window; per request where it ran alone
  (tui.bench.stats.energy; the definitions are tui.core.energy's).
"""

from __future__ import annotations

from typing import Any

from tui.bench.report.shape import Comparison, EngineSummary, Failure, LevelSummary, Summary
from tui.bench.run.records import LevelRun, RequestRecord
from tui.bench.run.results import BenchResult, EngineRun
from tui.bench.stats.arrivals import arrival_summary
from tui.bench.stats.batching import fit_batching
from tui.bench.stats.depth import summarize_depth
from tui.bench.stats.reasoning import reasoned, reasoning_summary
from tui.bench.stats.samples import N_BOOT, interval_dict, metric_values
from tui.bench.stats.slo import goodput, meets_slo  # noqa: F401 - meets_slo re-exported
from tui.bench.stats.workload import workload_summary
from tui.core.stats import median, ratio_ci, summarize, summarize_weighted

CI_METRICS = ("decode_tps", "prefill_tps", "ttft_ms", "ttfo_ms", "itl_ms", "tpot_ms", "e2e_ms")
PERCENTILE_METRICS = ("ttft_ms", "ttfo_ms", "itl_ms", "tpot_ms", "e2e_ms")
COMPARED = ("decode_tps", "prefill_tps", "ttft_ms", "e2e_ms")
COMPARED_WITH_REASONING = ("ttfo_ms",)  # compared where either engine's level reasoned
PROMPT_MISMATCH = 0.02  # prompt token counts differing by more than 2 % are flagged
PRE_SEND_WAIT_NOTE_MS = 5.0  # an engine-side queue longer than this is pointed out


def level_total_tps(level: LevelRun) -> float | None:
    """Σ output tokens of ok requests / the level's wall time."""
    ok = [r for r in level.records if r.ok]
    wall = level.wall_s
    return sum(r.metrics.output_tokens or 0 for r in ok) / wall if (wall and ok) else None


def summarize_level(
    level: LevelRun,
    single_tps: float | None,
    slo: dict[str, float],
    max_tokens: int,
    n_boot: int = N_BOOT,
) -> LevelSummary:
    recs = [r for r in level.records if r.status != "cancelled"]
    ok = [r for r in recs if r.ok]
    wall = level.wall_s
    tokens = sum(r.metrics.output_tokens or 0 for r in ok)
    total_tps = tokens / wall if wall and ok else None
    eta = total_tps / single_tps if (total_tps and single_tps) else None
    pooled_itl = [x for r in ok for x in r.metrics.itl_token_ms]
    pooled_weights = [w for r in ok for w in r.metrics.itl_token_weights]
    out: LevelSummary = {
        "label": level.label,
        "kind": level.kind,
        "concurrency": level.concurrency,
        "rate": level.rate,
        "complete": level.complete,
        "requests": len(recs),
        "ok": len(ok),
        "failed": sum(1 for r in recs if r.status == "failed"),
        "cancelled": sum(1 for r in level.records if r.status == "cancelled"),
        "wall_s": wall,
        "paused_s": level.paused_s,
        "engine_truth": level.engine_truth,
        "extra_requests": dict(level.extra_requests),
        "output_tokens": tokens,
        "total_tps": total_tps,
        "request_rate": len(ok) / wall if wall else None,
        "eta": eta,
        "eta_per_slot": eta / level.concurrency if (eta and level.concurrency) else None,
        "percentiles": {
            "ttft_ms": summarize(metric_values(ok, "ttft_ms")).to_dict(),
            "ttfo_ms": summarize(metric_values(ok, "ttfo_ms")).to_dict(),
            "itl_ms": summarize_weighted(pooled_itl, pooled_weights).to_dict(),
            "tpot_ms": summarize(metric_values(ok, "tpot_ms")).to_dict(),
            "e2e_ms": summarize(metric_values(ok, "e2e_ms")).to_dict(),
        },
        "medians": _medians(ok, n_boot),
        "prompt_tokens_median": _median_or_none(
            [r.metrics.prompt_tokens for r in ok if r.metrics.prompt_tokens is not None]
        ),
        "pre_send_wait_ms": summarize(
            [r.pre_send_wait_ms for r in recs if r.pre_send_wait_ms is not None]
        ).to_dict(),
        "short_outputs": sum(
            1 for r in ok if (r.metrics.output_tokens or 0) < (r.max_tokens or max_tokens)
        ),
        "workload": workload_summary(ok),
        "output_tokens_estimated": any(r.metrics.output_tokens_estimated for r in ok),
        "prefill_estimated": any(r.metrics.prefill_tps_source == "estimate" for r in ok),
        "reasoning": reasoning_summary(ok, n_boot),
        "cut": sum(1 for r in recs if r.status == "cut"),
    }
    if level.kind == "cold":
        loads = [r.load_ms for r in recs if r.load_ms is not None]
        out["load_ms"] = interval_dict(loads, n_boot=n_boot)
    if slo:
        out["goodput"] = goodput(recs, slo, wall)
    if level.arrivals is not None:
        out["arrivals"] = arrival_summary(level)
        out["stop_reason"] = level.stop_reason
    return out


def _medians(ok: list[RequestRecord], n_boot: int) -> dict[str, Any]:
    """Each CI metric's median and interval. TTFO's values are TTFT's wherever no request
    reasoned: its interval is then TTFT's (the same values, the same seed), not drawn again."""
    values = {k: metric_values(ok, k) for k in CI_METRICS}
    out: dict[str, Any] = {}
    for k in CI_METRICS:
        if k == "ttfo_ms" and values[k] == values["ttft_ms"]:
            out[k] = out["ttft_ms"]
        else:
            out[k] = interval_dict(values[k], n_boot=n_boot)
    return out


def _median_or_none(xs: list[float] | list[int]) -> float | None:
    return median([float(x) for x in xs]) if xs else None


def headline_level(run: EngineRun) -> LevelRun | None:
    """The level a blog table shows: c=1 when measured, else the first level."""
    for level in run.levels:
        if level.concurrency == 1:
            return level
    return run.levels[0] if run.levels else None


def summarize_engine(run: EngineRun, result: BenchResult, n_boot: int = N_BOOT) -> EngineSummary:
    plan = result.plan
    head = headline_level(run)
    c1 = next((lv for lv in run.levels if lv.concurrency == 1), None)
    single = None
    if c1 is not None:
        single = level_total_tps(c1)
    levels = [summarize_level(lv, single, plan.slo, plan.max_tokens, n_boot) for lv in run.levels]
    cold = summarize_level(run.cold, None, {}, plan.max_tokens, n_boot) if run.cold else None
    if result.energy is not None:
        from tui.bench.stats.energy import level_energy

        for lv_dict, lv in zip(levels, run.levels):
            lv_dict["energy"] = level_energy(lv, result.energy)
        if cold is not None and run.cold is not None:
            cold["energy"] = level_energy(run.cold, result.energy)
    measured = run.measured()
    failures: list[Failure] = [
        {
            "level": r.level,
            "index": r.index,
            "request_id": r.request_id,
            "kind": r.timeline.error_kind,
            "message": r.error,
        }
        for r in measured
        if r.status == "failed"
    ]
    requests = len([r for r in measured if r.status != "cancelled"])
    ok = sum(1 for r in measured if r.ok)
    etas = {
        c: lv["eta"]
        for lv in levels
        if lv["kind"] == "concurrency" and (c := lv["concurrency"]) is not None
    }
    return {
        "name": run.name,
        "kind": run.kind,
        "error": run.error,
        "load_ms": run.load_ms,
        "capacity": run.capacity,
        "capacity_source": run.capacity_source,
        "capacity_note": run.capacity_note,
        "prompt": run.prompt.to_dict() if run.prompt else None,
        "cold_method": run.cold_method,
        "cold_note": run.cold_note,
        "headline": head.label if head else None,
        "single_request_tps": single,
        "levels": levels,
        "cold": cold,
        "requests": requests,
        "ok": ok,
        "failed": len(failures),
        "cancelled": sum(1 for r in measured if r.status == "cancelled"),
        "failures": failures,
        "warnings": list(run.warnings),
        "setup_requests": dict(run.setup_requests),
        "capacity_search": run.capacity_search,
        "all_failed": run.error is not None or (requests > 0 and ok == 0),
        # context depth and the batching-model fit
        "depth": summarize_depth(run, n_boot),
        "batching": fit_batching(run.levels, etas, n_boot),
    }


def compare(result: BenchResult, n_boot: int = N_BOOT) -> list[Comparison]:
    """Ratios of each engine's headline medians to the first engine's, with intervals."""
    runs = [r for r in result.engines if headline_level(r) is not None]
    out: list[Comparison] = []
    if len(runs) < 2:
        return out
    base = runs[0]
    base_level = headline_level(base)
    assert base_level is not None
    for other in runs[1:]:
        level = headline_level(other)
        assert level is not None
        thought = any(r.ok and reasoned(r.metrics) for r in level.records + base_level.records)
        for metric in COMPARED + (COMPARED_WITH_REASONING if thought else ()):
            a = metric_values(level.records, metric)
            b = metric_values(base_level.records, metric)
            if not a or not b or median(b) == 0:
                continue
            iv = ratio_ci(a, b, median, n_boot=n_boot)
            out.append(
                {
                    "metric": metric,
                    "engine": other.name,
                    "baseline": base.name,
                    "level": level.label,
                    "ratio": iv.estimate,
                    "low": iv.low,
                    "high": iv.high,
                    "n": [len(a), len(b)],
                }
            )
    return out


def fairness(result: BenchResult, engines: list[EngineSummary]) -> list[str]:
    """Cross-engine checks, as sentences for the report."""
    notes: list[str] = []
    counted = {
        e["name"]: prompt["counted_tokens"]
        for e in engines
        if (prompt := e["prompt"]) and prompt.get("counted_tokens") is not None
    }
    if len(counted) >= 2:
        lo, hi = min(counted.values()), max(counted.values())
        if hi - lo > PROMPT_MISMATCH * hi:
            notes.append(f"prompt token counts differ between engines: {counted}")
        else:
            notes.append(f"prompt token counts agree across engines: {counted}")
    for e in engines:
        short = sum(lv["short_outputs"] for lv in e["levels"])
        ok = sum(lv["ok"] for lv in e["levels"])
        if short:
            notes.append(
                f"{e['name']}: {short} of {ok} requests stopped before {result.plan.max_tokens} "
                "tokens (output length not fixed: the engine may not honour ignore_eos)"
            )
        if any(lv["output_tokens_estimated"] for lv in e["levels"]):
            notes.append(f"{e['name']}: output tokens counted from chunks (engine gives none)")
        for lv in e["levels"]:
            wait = lv["pre_send_wait_ms"]
            if wait.get("n") and (wait.get("p90") or 0) > PRE_SEND_WAIT_NOTE_MS:
                notes.append(
                    f"{e['name']} {lv['label']}: requests waited p50 {wait['p50']:.0f} ms / "
                    f"p90 {wait['p90']:.0f} ms inside the engine before it stamped them sent; "
                    "that queue time is not in TTFT (pre_send_wait_ms in report.csv)"
                )
        if any(lv["prefill_estimated"] for lv in e["levels"]):
            notes.append(f"{e['name']}: prompt tok/s is an estimate (prompt tokens / TTFT)")
        if any((lv.get("reasoning") or {}).get("reasoning_tokens_estimated") for lv in e["levels"]):
            notes.append(
                f"{e['name']}: reasoning tokens counted from reasoning chunks (the engine "
                "counts none apart): reasoning and answer tokens, and their tok/s, are estimates"
            )
    by_name = {run.name: run for run in result.engines}
    for e in engines:
        run = by_name.get(e["name"])
        if run is not None and run.error is None:
            notes += control_notes(run, result.plan.max_tokens, result.plan.prefix_cache)
    notes.append(
        "prompts: each request's prompt is distinct from its first words (a request number "
        "leads); the engine's chat template may put a prefix shared by all before it, which "
        "a prefix cache can reuse"
    )
    return notes


def control_notes(run: EngineRun, max_tokens: int, prefix_cache: bool = False) -> list[str]:
    """What was sent for output length and prompt-cache reuse, and what the answers show."""
    ok = [r for r in run.measured() if r.ok]
    if not ok:
        return []
    ignore = run.controls.get("ignore_eos", "unknown")
    cache = run.controls.get("cache_prompt", "unknown")
    full = sum(1 for r in ok if r.metrics.output_tokens == (r.max_tokens or max_tokens))
    asked = "the asked" if any(r.max_tokens not in (None, max_tokens) for r in ok) else ""
    asked = asked or str(max_tokens)
    if full == len(ok):
        length = f"output length fixed: all {len(ok)} answers had {asked} tokens"
    else:
        length = (
            f"output length not fixed: {len(ok) - full} of {len(ok)} answers had other than "
            f"{asked} tokens"
        )
    notes = [f"{run.name}: {length} (ignore_eos {ignore})"]
    cached = [
        r.timeline.truth.cached_tokens
        for r in ok
        if r.timeline.truth is not None and r.timeline.truth.cached_tokens is not None
    ]
    if not cached:
        seen = "the engine reports no cached-token count, so reuse cannot be ruled out"
    elif not any(cached):
        seen = f"the engine reported 0 cached prompt tokens on all {len(cached)} it counted"
    else:
        hits = [c for c in cached if c]
        seen = (
            f"the engine reported cached prompt tokens on {len(hits)} of {len(cached)} "
            f"requests (up to {max(hits)}): their TTFT includes prefix-cache hits"
        )
    if prefix_cache:
        cache = "asked for (--prefix-cache: cache_prompt true)"
    asks = "asks for it" if prefix_cache else "asks for none"
    notes.append(f"{run.name}: prompt-cache reuse (the bench {asks}): {cache}; {seen}")
    return notes


def summarize_result(result: BenchResult, n_boot: int = N_BOOT) -> Summary:
    """Everything report.json's "summary" holds. ``n_boot``: bootstrap resamples per
    interval (checkpoints written mid-bench use fewer; the number is recorded)."""
    engines = [summarize_engine(r, result, n_boot) for r in result.engines]
    return {
        "engines": engines,
        "comparisons": compare(result, n_boot),
        "bootstrap_resamples": n_boot,
        "fairness": fairness(result, engines),
    }
