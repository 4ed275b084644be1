"""Compare bench reports: B against A, per engine and load level, as ratios with intervals.

For each engine present in both reports and each load level both measured (matched by
label: "c=1", "c=8", "rate=2", "cold"), five ratios B ÷ A, and a sixth where a reasoning
model thought:

- decode tok/s: median over ok requests of each request's decode tok/s
  ((N − 1) / (t_last − t_first), tui.core.metrics).
- TTFT: median over ok requests of each request's TTFT (first token of any kind).
- TTFO: median over ok requests of each request's TTFO (first answer token or tool call,
  the thinking before it included). Only where both levels' records carry it (reports
  written before TTFO existed do not: the comparison says so) and it differs from TTFT
  in one of them; without reasoning TTFO = TTFT, and the row would repeat TTFT's.
- ITL p50 / ITL p90: the 50th / 90th percentile of the level's per-token ITL values,
  pooled over its ok requests (the figures report.md shows as "ITL p50 / p90"); each
  value counted for the tokens it stands for (its weight, tui.core.metrics).
- total tok/s: Σ output tokens of ok requests / the level's wall time (first request sent
  → last request ended), as in tui.bench.stats.aggregate.

Intervals are percentile-bootstrap 95 % intervals of the ratio, ``N_BOOT`` resamples with
a fixed seed (the same inputs give the same output; tui/bench/compare/boot.py). The unit
resampled is the request: one report is one bench, so a level's requests are its only
replicates. Each side is resampled on its own (the two benches are independent); a
request's ITL gaps travel together (they are not independent of each other). A
resample's statistic is the point statistic of the resampled requests, except total
tok/s, which is one wall-time measurement per level: a resample's total tok/s is the
measured total × (its Σ tokens / Σ request durations) ÷ (the same over all the level's
requests) — the level's occupancy is held at what was measured and the requests' own
throughput varies.

A ratio is "no change" when its interval holds 1.0; otherwise "better" or "worse" by the
metric's direction (higher tok/s is better, lower TTFT/ITL is better). With fewer than two
requests on a side there is no interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from tui.bench.compare.boot import percentile_interval, resampled_statistics
from tui.bench.compare.env import environment_differences
from tui.bench.compare.samples import LevelSample, RequestSample, level_samples
from tui.bench.report.shape import BenchReport
from tui.core.stats import median, weighted_percentile

SCHEMA = "infertop.compare/1"
N_BOOT = 2000
SEED = 0
LEVEL = 0.95

# name -> (words, unit, higher is better)
METRICS: dict[str, tuple[str, str, bool]] = {
    "decode_tps": ("decode tok/s", "tok/s", True),
    "ttft_ms": ("TTFT", "ms", False),
    "itl_p50_ms": ("ITL p50", "ms", False),
    "itl_p90_ms": ("ITL p90", "ms", False),
    "total_tps": ("total tok/s", "tok/s", True),
}
# compared where both levels carry it and a request reasoned (the module docstring)
TTFO_METRIC: dict[str, tuple[str, str, bool]] = {"ttfo_ms": ("TTFO", "ms", False)}


def _median_of(field: str) -> Callable[[Sequence[RequestSample]], float | None]:
    def stat(rs: Sequence[RequestSample]) -> float | None:
        xs = [v for v in (getattr(r, field) for r in rs) if v is not None]
        return median(xs) if xs else None

    return stat


def _pooled_itl(q: float) -> Callable[[Sequence[RequestSample]], float | None]:
    def stat(rs: Sequence[RequestSample]) -> float | None:
        xs = list(chain.from_iterable(r.itl_token_ms for r in rs))
        ws = list(chain.from_iterable(r.itl_weights for r in rs))
        return weighted_percentile(xs, ws, q) if xs else None

    return stat


def _total_tps(level: LevelSample) -> Callable[[Sequence[RequestSample]], float | None]:
    """See the module docstring: measured total × resample's tokens-per-busy-second ratio."""

    def rate(rs: Sequence[RequestSample]) -> float | None:
        busy = sum(r.duration_s for r in rs)
        return sum(r.output_tokens for r in rs) / busy if busy > 0 else None

    whole = rate(level.requests)

    def stat(rs: Sequence[RequestSample]) -> float | None:
        part = rate(rs)
        if level.total_tps is None or not whole or part is None:
            return None
        return level.total_tps * part / whole

    return stat


def statistic(metric: str, level: LevelSample) -> Callable[[Sequence[RequestSample]], float | None]:
    if metric == "decode_tps":
        return _median_of("decode_tps")
    if metric == "ttft_ms":
        return _median_of("ttft_ms")
    if metric == "ttfo_ms":
        return _median_of("ttfo_ms")
    if metric == "itl_p50_ms":
        return _pooled_itl(50)
    if metric == "itl_p90_ms":
        return _pooled_itl(90)
    if metric == "total_tps":
        return _total_tps(level)
    raise ValueError(f"unknown metric {metric!r}")


def verdict(ratio: float | None, low: float | None, high: float | None, higher: bool) -> str:
    """'no change' when the interval holds 1.0, else 'better' / 'worse' by direction."""
    if ratio is None:
        return "not measured"
    if low is None or high is None:
        return "too few requests"
    if low <= 1.0 <= high:
        return "no change"
    return "better" if (ratio > 1.0) == higher else "worse"


def compare_levels(
    a: LevelSample, b: LevelSample, n_boot: int = N_BOOT, seed: int = SEED
) -> list[dict[str, Any]]:
    """One row per metric (TTFO's only where :meth:`LevelSample.ttfo_compared_with`):
    A's and B's values, B ÷ A, its interval and the verdict.

    Point values come from the statistic over all requests (tui.core.stats); the
    interval from the resampled ratios (tui.bench.compare.boot), each side resampled on
    its own from one generator seeded with ``seed``."""
    import numpy as np

    boot_a = boot_b = None
    if len(a.requests) >= 2 and len(b.requests) >= 2:
        rng = np.random.default_rng(seed)
        boot_a = resampled_statistics(a, n_boot, rng)
        boot_b = resampled_statistics(b, n_boot, rng)
    rows = []
    metrics = METRICS | (TTFO_METRIC if a.ttfo_compared_with(b) else {})
    for metric, (words, unit, higher) in metrics.items():
        va, vb = statistic(metric, a)(a.requests), statistic(metric, b)(b.requests)
        ratio = vb / va if (va and vb is not None) else None
        low = high = None
        if ratio is not None and boot_a is not None and boot_b is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios = boot_b[metric] / boot_a[metric]
            low, high = percentile_interval(ratios, LEVEL)
        rows.append(
            {
                "engine_a": a.engine,
                "engine_b": b.engine,
                "level": a.label,
                "metric": metric,
                "metric_words": words,
                "unit": unit,
                "higher_is_better": higher,
                "a": va,
                "b": vb,
                "n": [len(a.requests), len(b.requests)],
                "ratio": ratio,
                "low": low,
                "high": high,
                "verdict": verdict(ratio, low, high, higher),
            }
        )
    return rows


def engine_pairs(a: BenchReport, b: BenchReport) -> tuple[list[tuple[str, str]], list[str]]:
    """Engines to compare: by name where the reports share names, else by position when
    they hold the same number of engines. Returns the pairs and notes on what was done."""
    names_a = [e["name"] for e in a.get("engines") or []]
    names_b = [e["name"] for e in b.get("engines") or []]
    common = [n for n in names_a if n in names_b]
    notes = []
    if common:
        pairs = [(n, n) for n in common]
        for n in names_a:
            if n not in common:
                notes.append(f"engine {n!r} is only in A: not compared")
        for n in names_b:
            if n not in common:
                notes.append(f"engine {n!r} is only in B: not compared")
    elif len(names_a) == len(names_b):
        pairs = list(zip(names_a, names_b, strict=True))
        notes += [
            f"no engine names in common: paired by position, {x} (A) ↔ {y} (B)" for x, y in pairs
        ]
    else:
        pairs = []
        notes.append(
            f"no engine names in common and different engine counts ({names_a} vs {names_b}): "
            "nothing to pair"
        )
    return pairs, notes


def compare_two(
    a: BenchReport, b: BenchReport, n_boot: int = N_BOOT, seed: int = SEED
) -> dict[str, Any]:
    """B against A: rows of ratios, environment differences and notes."""
    pairs, notes = engine_pairs(a, b)
    la, lb = level_samples(a), level_samples(b)
    rows: list[dict[str, Any]] = []
    for ea, eb in pairs:
        labels_a = [lab for (e, lab) in la if e == ea]
        labels_b = [lab for (e, lab) in lb if e == eb]
        for label in labels_a:
            if label in labels_b:
                rows += compare_levels(la[(ea, label)], lb[(eb, label)], n_boot, seed)
            else:
                notes.append(f"{ea} {label}: only in A")
        notes += [f"{eb} {label}: only in B" for label in labels_b if label not in labels_a]
    notes += _ttfo_notes(pairs, la, lb)
    for side, rep in (("A", a), ("B", b)):
        if rep.get("partial"):
            notes.append(f"{side} is a partial report ({rep.get('partial_reason')})")
        if any("model_file" not in e for e in rep.get("engines") or []):
            notes.append(
                f"{side} predates model file fingerprints in reports: its model is compared "
                "by name and path only"
            )
    return {
        "rows": rows,
        "environment_differences": environment_differences(a, b, pairs),
        "notes": notes,
    }


def _ttfo_notes(
    pairs: list[tuple[str, str]],
    la: dict[tuple[str, str], LevelSample],
    lb: dict[tuple[str, str], LevelSample],
) -> list[str]:
    """Where one side reasoned but the other's report has no TTFO to set against it."""
    notes = []
    for ea, eb in pairs:
        for (e, label), a in la.items():
            b = lb.get((eb, label))
            if e != ea or b is None or a.has_ttfo == b.has_ttfo:
                continue
            side, old = ("A", "B") if a.has_ttfo else ("B", "A")
            if (a if a.has_ttfo else b).ttfo_differs:
                notes.append(
                    f"{ea} {label}: TTFO not compared: {side} reasoned, {old}'s report "
                    "predates TTFO (its TTFT includes any thinking)"
                )
    return notes


def compare_reports(
    reports: list[tuple[Path, BenchReport]], n_boot: int = N_BOOT, seed: int = SEED
) -> dict[str, Any]:
    """Every report after the first against the first (the baseline, A)."""
    if len(reports) < 2:
        raise ValueError("compare needs two or more reports")
    (path_a, a), rest = reports[0], reports[1:]
    return {
        "schema": SCHEMA,
        "reports": [describe(p, r) for p, r in reports],
        "bootstrap": {
            "resamples": n_boot,
            "seed": seed,
            "level": LEVEL,
            "unit": "request (each side resampled on its own)",
        },
        "comparisons": [
            {"a": str(path_a), "b": str(p), **compare_two(a, r, n_boot, seed)} for p, r in rest
        ],
    }


def describe(path: Path, report: BenchReport) -> dict[str, Any]:
    return {
        "path": str(path),
        "started_at": report.get("started_at"),
        "partial": bool(report.get("partial")),
        "engines": [
            {
                "name": e.get("name"),
                "kind": e.get("kind"),
                "model": (e.get("info") or {}).get("model"),
            }
            for e in report.get("engines") or []
        ],
    }
